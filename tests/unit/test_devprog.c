/* tests/unit/test_devprog.c: user device code (spec/device-code.md).
 *
 * The module side: sections 17 (shaders) and 18 (kernels) round trip and
 * reject hostile sizes; the verifier checks the SPIR-V header and every
 * VK_COMPUTE / GPU_LAUNCH argument count; the assembler compiles GLSL,
 * reports compile errors at the .basm line they come from, and the
 * disassembly re-assembles byte for byte. The run side: a user saxpy shader
 * on the Vulkan executor (lavapipe in CI) against the same computation on
 * the CPU, with the validation layer on and silent, both through the
 * executor's program interface and through VK_COMPUTE in a program. Without a
 * Vulkan device those tests print "SKIP: <reason>" and are skipped.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assembler/asm.h"
#include "backends/backend.h"
#include "backends/vulkan/vulkan.h"
#include "include/bib.h"
#include "module/module.h"

static const char saxpy_glsl[] = "#version 450\n"
                                 "layout(local_size_x = 64) in;\n"
                                 "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
                                 "layout(std430, binding = 1) buffer Y { float y[]; };\n"
                                 "layout(push_constant) uniform Push { float a; uint n; };\n"
                                 "void main() {\n"
                                 "    uint i = gl_GlobalInvocationID.x;\n"
                                 "    if (i < n) { precise float p = a * x[i]; y[i] = p + y[i]; }\n"
                                 "}\n";

/* A program: x[i] = i, y[i] = 1 for n = 1000, saxpy with a = 2 on the
   device, then returns how many y[i] differ from 2*i + 1 computed on the
   CPU (0 when all agree). */
static const char saxpy_program[] = ".tensors 2\n"
                                    ".shader saxpy glsl\n"
                                    "%s"
                                    ".endshader\n"
                                    ".func main regs=20\n"
                                    "    LDI r0, 1000\n"
                                    "    ALLOC t0, f32, r0, 1\n"
                                    "    ALLOC t1, f32, r0, 1\n"
                                    "    LDI r8, 0\n"
                                    "    LDI r9, 1\n"
                                    "    ITOF r10, r9\n"
                                    "fill:\n"
                                    "    ITOF r11, r8\n"
                                    "    TSET t0, r8, r11\n"
                                    "    TSET t1, r8, r10\n"
                                    "    ADDI r8, r8, 1\n"
                                    "    JLT r8, r0, fill\n"
                                    "    VK_INIT -1\n"
                                    "    LDI r1, 16\n"
                                    "    LDI r2, 1\n"
                                    "    LDI r3, 1\n"
                                    "    LDI r4, 0\n"
                                    "    LDI r5, 1\n"
                                    "    LDI r6, 0x40000000\n"
                                    "    MOV r7, r0\n"
                                    "    VK_COMPUTE saxpy, r1, r4, 2\n"
                                    "    VK_SUBMIT\n"
                                    "    VK_SYNC\n"
                                    "    LDI r8, 0\n"
                                    "    LDI r12, 0\n"
                                    "    LDI r13, 2\n"
                                    "    ITOF r13, r13\n"
                                    "check:\n"
                                    "    TGET r11, t1, r8\n"
                                    "    ITOF r14, r8\n"
                                    "    FMUL r14, r14, r13\n"
                                    "    FADD r14, r14, r10\n"
                                    "    JEQ r11, r14, same\n"
                                    "    ADDI r12, r12, 1\n"
                                    "same:\n"
                                    "    ADDI r8, r8, 1\n"
                                    "    JLT r8, r0, check\n"
                                    "    HALT r12\n"
                                    ".end\n";

static char *format_text(const char *format, const char *arg) {
    size_t n = strlen(format) + strlen(arg) + 1;
    char *s = malloc(n);
    cr_assert_not_null(s);
    snprintf(s, n, format, arg);
    return s;
}

/* A copy of text with its first `from` replaced by `to`. */
static char *replace_text(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    cr_assert_not_null(at, "'%s' is not in the text", from);
    size_t head = (size_t)(at - text), n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);
    cr_assert_not_null(s);
    snprintf(s, n, "%.*s%s%s", (int)head, text, to, at + strlen(from));
    return s;
}

static bib_status_t assemble(const char *src, uint8_t **bytes, size_t *size, char **diag) {
    return bib_assemble(src, strlen(src), "test.basm", bytes, size, diag);
}

/* A minimal module in memory: one function "main" (HALT r0), no code that
   names device programs unless the test adds it. */
static bib_module_t *small_module(void) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code = calloc(4, sizeof *m->code);
    m->code[0].op = BIB_CODE_HALT;
    m->code_count = 1;
    m->funcs = calloc(1, sizeof *m->funcs);
    m->funcs[0] = (bib_function_t){strdup("main"), 0, 1, 0, 16};
    m->func_count = 1;
    m->tensor_regs = 4;
    return m;
}

static const uint32_t header_words[] = {0x07230203u, 0x00010300u, 0, 16, 0, 0x00020011u, 1};

static void add_shader(bib_module_t *m, uint32_t bindings, uint32_t push) {
    m->shaders = calloc(1, sizeof *m->shaders);
    m->shader_count = 1;
    bib_shader_decl_t *sh = &m->shaders[0];
    sh->name = strdup("s");
    sh->entry = strdup("main");
    sh->bindings = bindings;
    sh->push_bytes = push;
    sh->words = sizeof header_words / 4;
    sh->spirv = malloc(sizeof header_words);
    memcpy(sh->spirv, header_words, sizeof header_words);
}

static void add_kernel(bib_module_t *m, const char *params) {
    m->kernels = calloc(1, sizeof *m->kernels);
    m->kernel_count = 1;
    bib_kernel_decl_t *k = &m->kernels[0];
    k->name = strdup("k");
    k->entry = strdup("k_entry");
    k->params = strdup(params);
    k->ptx = strdup(".version 7.0\n.target sm_75\n");
    k->ptx_bytes = (uint32_t)strlen(k->ptx);
}

static bib_status_t verify(bib_module_t *m, bib_diag_t *diag) {
    diag->msg[0] = '\0';
    return bib_module_verify(m, diag);
}

/* ---- format -------------------------------------------------------------- */

/* A run that found no device for user device code: SKIP with the reason
 * (read before the VM is destroyed). */
static void skip_without_vulkan(bib_vm_t *vm, bib_status_t st) {
    if (st != BIB_OK && strstr(bib_vm_error(vm), "no device for user device code") != NULL) {
        char why[512];
        snprintf(why, sizeof why, "%s", bib_vm_error(vm));
        printf("SKIP: %s\n", why);
        bib_vm_destroy(vm);
        cr_skip_test("no Vulkan: %s", why);
    }
}

Test(devprog_format, shaders_and_kernels_round_trip) {
    bib_module_t *m = small_module();
    add_shader(m, 3, 12);
    add_kernel(m, "tif");
    uint8_t *bytes;
    size_t size;
    bib_diag_t diag;
    cr_assert_eq(bib_module_write(m, &bytes, &size, &diag), BIB_OK, "%s", diag.msg);
    bib_module_t *back;
    cr_assert_eq(bib_module_read(bytes, size, &back, &diag), BIB_OK, "%s", diag.msg);
    cr_assert_eq(back->shader_count, 1);
    cr_assert_str_eq(back->shaders[0].name, "s");
    cr_assert_str_eq(back->shaders[0].entry, "main");
    cr_assert_eq(back->shaders[0].bindings, 3);
    cr_assert_eq(back->shaders[0].push_bytes, 12);
    cr_assert_eq(back->shaders[0].words, m->shaders[0].words);
    cr_assert_eq(memcmp(back->shaders[0].spirv, header_words, sizeof header_words), 0);
    cr_assert_eq(back->kernel_count, 1);
    cr_assert_str_eq(back->kernels[0].params, "tif");
    cr_assert_str_eq(back->kernels[0].entry, "k_entry");
    cr_assert_str_eq(back->kernels[0].ptx, m->kernels[0].ptx);
    uint8_t *again;
    size_t again_size;
    cr_assert_eq(bib_module_write(back, &again, &again_size, &diag), BIB_OK);
    cr_assert_eq(again_size, size);
    cr_assert_eq(memcmp(again, bytes, size), 0, "write(read(write(m))) differs");
    free(again);
    free(bytes);
    bib_module_free(back);
    bib_module_free(m);
}

/* Rewrites the header checksum after a test edits bytes. */
static uint32_t crc_of(const uint8_t *b, size_t size);

/* Finds the section entry of a type; returns the byte offset of its data. */
static uint32_t section_offset(const uint8_t *b, uint32_t type) {
    uint32_t count = bib_read_u32le(b + 12), table = bib_read_u32le(b + 16);
    for (uint32_t i = 0; i < count; i++)
        if (bib_read_u32le(b + table + 16 * i) == type)
            return bib_read_u32le(b + table + 16 * i + 8);
    cr_assert_fail("no section %u", type);
    return 0;
}

#include <zlib.h>
static uint32_t crc_of(const uint8_t *b, size_t size) {
    static const uint8_t zeros[4] = {0, 0, 0, 0};
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, b, 24);
    crc = crc32(crc, zeros, 4);
    crc = crc32(crc, b + 28, (uInt)(size - 28));
    return (uint32_t)crc;
}

static void expect_format_error(uint8_t *bytes, size_t size, const char *needle) {
    bib_write_u32le(bytes + 24, crc_of(bytes, size));
    bib_module_t *back = NULL;
    bib_diag_t diag;
    diag.msg[0] = '\0';
    cr_expect_eq(bib_module_read(bytes, size, &back, &diag), BIB_E_FORMAT, "%s", diag.msg);
    cr_expect_null(back);
    cr_expect(strstr(diag.msg, needle) != NULL, "message '%s' lacks '%s'", diag.msg, needle);
}

static void written(bib_module_t *m, uint8_t **bytes, size_t *size) {
    bib_diag_t diag;
    cr_assert_eq(bib_module_write(m, bytes, size, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
}

Test(devprog_format, hostile_shader_count_is_a_format_error) {
    bib_module_t *m = small_module();
    add_shader(m, 1, 0);
    uint8_t *b;
    size_t size;
    written(m, &b, &size);
    bib_write_u32le(b + section_offset(b, BIB_SEC_SHADERS), 0xFFFFFFFFu);
    expect_format_error(b, size, "shader count 4294967295 cannot fit");
    free(b);
}

Test(devprog_format, hostile_spirv_word_count_is_a_format_error) {
    bib_module_t *m = small_module();
    add_shader(m, 1, 0);
    uint8_t *b;
    size_t size;
    written(m, &b, &size);
    /* header 8, name "s" 3, entry "main" 6, bindings 4, push 4, then words */
    uint32_t at = section_offset(b, BIB_SEC_SHADERS) + 8 + 3 + 6 + 8;
    bib_write_u32le(b + at, 0x40000000u);
    expect_format_error(b, size, "SPIR-V words but only");
    free(b);
}

Test(devprog_format, hostile_ptx_size_is_a_format_error) {
    bib_module_t *m = small_module();
    add_kernel(m, "t");
    uint8_t *b;
    size_t size;
    written(m, &b, &size);
    /* header 8, name "k" 3, entry "k_entry" 9, params "t" 3, then the size */
    uint32_t at = section_offset(b, BIB_SEC_KERNELS) + 8 + 3 + 9 + 3;
    bib_write_u32le(b + at, 0xFFFFFFF0u);
    expect_format_error(b, size, "PTX bytes but only");
    free(b);
}

Test(devprog_format, truncated_shaders_section_is_a_format_error) {
    bib_module_t *m = small_module();
    add_shader(m, 1, 0);
    uint8_t *b;
    size_t size;
    written(m, &b, &size);
    /* Claim one shader more than present: the second ends the section. */
    bib_write_u32le(b + section_offset(b, BIB_SEC_SHADERS), 2);
    expect_format_error(b, size, "shaders section ends inside");
    free(b);
}

/* ---- verifier ------------------------------------------------------------- */

Test(devprog_verify, bad_spirv_magic_is_rejected) {
    bib_module_t *m = small_module();
    add_shader(m, 1, 0);
    m->shaders[0].spirv[0] = 0x03022307u; /* byte-swapped */
    bib_diag_t diag;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "not the magic 0x07230203") != NULL, "%s", diag.msg);
    bib_module_free(m);
}

Test(devprog_verify, bad_spirv_version_and_bound_are_rejected) {
    bib_module_t *m = small_module();
    add_shader(m, 1, 0);
    bib_diag_t diag;
    m->shaders[0].spirv[1] = 0x00020000u;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "version word") != NULL, "%s", diag.msg);
    m->shaders[0].spirv[1] = 0x00010300u;
    m->shaders[0].spirv[3] = 0;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "id bound 0") != NULL, "%s", diag.msg);
    m->shaders[0].words = 3;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "shorter than the 5-word header") != NULL, "%s", diag.msg);
    bib_module_free(m);
}

Test(devprog_verify, push_size_must_be_whole_words_within_128) {
    bib_module_t *m = small_module();
    add_shader(m, 1, 6);
    bib_diag_t diag;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "push-constant size 6") != NULL, "%s", diag.msg);
    m->shaders[0].push_bytes = 132;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    bib_module_free(m);
}

Test(devprog_verify, vk_compute_binding_count_must_match_the_shader) {
    bib_module_t *m = small_module();
    add_shader(m, 2, 8);
    m->code[0] = (bib_insn_t){BIB_CODE_VK_COMPUTE, 0, 0, 3, 3};
    m->code[1] = (bib_insn_t){BIB_CODE_HALT, 0, 0, 0, 0};
    m->code_count = 2;
    m->funcs[0].count = 2;
    bib_diag_t diag;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "gives 3 bindings but 's' declares 2") != NULL, "%s", diag.msg);
    m->code[0].d = 2;
    cr_expect_eq(verify(m, &diag), BIB_OK, "%s", diag.msg);
    /* Bindings r3..r4 and two push words r5..r6 must fit the frame. */
    m->funcs[0].nregs = 6;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "outside function 'main' frame of 6") != NULL, "%s", diag.msg);
    bib_module_free(m);
}

Test(devprog_verify, vk_compute_shader_index_is_range_checked) {
    bib_module_t *m = small_module();
    m->code[0] = (bib_insn_t){BIB_CODE_VK_COMPUTE, 0, 0, 3, 1};
    m->code[1] = (bib_insn_t){BIB_CODE_HALT, 0, 0, 0, 0};
    m->code_count = 2;
    m->funcs[0].count = 2;
    bib_diag_t diag;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "shader index 0 out of range (module has 0 shaders)") != NULL, "%s",
              diag.msg);
    bib_module_free(m);
}

Test(devprog_verify, gpu_launch_argument_count_must_match_the_signature) {
    bib_module_t *m = small_module();
    add_kernel(m, "tti");
    m->code[0] = (bib_insn_t){BIB_CODE_GPU_LAUNCH, 0, 0, 6, 2};
    m->code[1] = (bib_insn_t){BIB_CODE_HALT, 0, 0, 0, 0};
    m->code_count = 2;
    m->funcs[0].count = 2;
    bib_diag_t diag;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "gives 2 kernel arguments but 'k' declares 3") != NULL, "%s",
              diag.msg);
    m->code[0].d = 3;
    cr_expect_eq(verify(m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
}

Test(devprog_verify, kernel_signature_letters_and_tensor_are_checked) {
    bib_module_t *m = small_module();
    add_kernel(m, "tx");
    bib_diag_t diag;
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "letters t, i, l, f, d") != NULL, "%s", diag.msg);
    free(m->kernels[0].params);
    m->kernels[0].params = strdup("if");
    cr_expect_eq(verify(m, &diag), BIB_E_VERIFY);
    cr_expect(strstr(diag.msg, "has no tensor") != NULL, "%s", diag.msg);
    bib_module_free(m);
}

/* ---- assembler ----------------------------------------------------------- */

Test(devprog_asm, glsl_shader_reflects_bindings_and_push) {
    char *src = format_text(saxpy_program, saxpy_glsl);
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_OK, "%s", diag ? diag : "");
    bib_module_t *m;
    bib_diag_t d;
    cr_assert_eq(bib_module_read(bytes, size, &m, &d), BIB_OK, "%s", d.msg);
    cr_expect_eq(m->shader_count, 1);
    cr_expect_eq(m->shaders[0].bindings, 2);
    cr_expect_eq(m->shaders[0].push_bytes, 8);
    cr_expect_eq(m->shaders[0].spirv[0], 0x07230203u);
    bib_module_free(m);
    bib_free(bytes);
    free(src);
}

Test(devprog_asm, glsl_compile_error_names_the_basm_line) {
    const char *src = ".shader bad glsl\n"             /* line 1 */
                      "#version 450\n"                 /* line 2: shader line 1 */
                      "layout(local_size_x = 1) in;\n" /* shader line 2 */
                      "layout(binding = 0) buffer B { float v[]; };\n"
                      "void main() { v[0] = nope; }\n" /* line 5: shader line 4 */
                      ".endshader\n"
                      ".func main regs=1\n    HALT r0\n.end\n";
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_E_ASM);
    cr_assert_not_null(diag);
    cr_expect(strstr(diag, "test.basm:5:1: error: shader 'bad' line 4:") != NULL, "%s", diag);
    cr_expect(strstr(diag, "nope") != NULL, "%s", diag);
    bib_free(diag);
}

Test(devprog_asm, declared_bindings_must_match_reflection) {
    char *text = format_text(saxpy_program, saxpy_glsl);
    char *src = replace_text(text, "saxpy glsl", "saxpy glsl bindings=3");
    free(text);
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_E_ASM);
    cr_expect(strstr(diag, "binds 2 buffers and pushes 8 bytes, but this line says bindings=3") !=
                  NULL,
              "%s", diag);
    bib_free(diag);
    free(src);
}

Test(devprog_asm, vk_compute_count_mismatch_is_an_assembly_error) {
    char *src = format_text(saxpy_program, saxpy_glsl);
    char *at = strstr(src, "r4, 2\n");
    at[4] = '3';
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_E_ASM);
    cr_expect(strstr(diag, "shader 'saxpy' takes 2 bindings, this passes 3") != NULL, "%s", diag);
    bib_free(diag);
    free(src);
}

static void expect_round_trip(const char *src) {
    uint8_t *bytes, *again;
    size_t size, again_size;
    char *diag = NULL, *text = NULL;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_OK, "%s", diag ? diag : "");
    cr_assert_eq(bib_disassemble(bytes, size, &text, &diag), BIB_OK, "%s", diag ? diag : "");
    cr_assert_eq(bib_assemble(text, strlen(text), "dis.basm", &again, &again_size, &diag), BIB_OK,
                 "%s\n%s", diag ? diag : "", text);
    cr_assert_eq(again_size, size);
    cr_expect_eq(memcmp(again, bytes, size), 0, "disassembly does not rebuild the bytes:\n%s",
                 text);
    bib_free(text);
    bib_free(bytes);
    bib_free(again);
}

Test(devprog_asm, disassembly_of_a_shader_reassembles_byte_identical) {
    char *src = format_text(saxpy_program, saxpy_glsl);
    expect_round_trip(src);
    free(src);
}

Test(devprog_asm, disassembly_of_kernels_reassembles_byte_identical) {
    /* One PTX that prints as lines, one (no final newline, a CR) as bytes. */
    expect_round_trip(".tensors 1\n"
                      ".kernel plain ptx-text entry=scale params=tif\n"
                      ".version 7.0\n"
                      ".target sm_75\n"
                      "\t.visible .entry scale() { ret; }\n"
                      ".endkernel\n"
                      ".kernel odd ptx-bytes entry=odd params=t\n"
                      "    0x2E 0x76 0x0D 0x0A 0x72\n"
                      ".endkernel\n"
                      ".func main regs=12\n"
                      "    GPU_LAUNCH plain, r0, r6, 3\n"
                      "    GPU_LAUNCH odd, r0, r6, 1\n"
                      "    HALT r0\n"
                      ".end\n");
}

Test(devprog_asm, kernel_from_cuda_source_needs_nvcc_or_says_why) {
    FILE *f = fopen("/tmp/bib_test_devprog.cu", "w");
    cr_assert_not_null(f);
    fputs("extern \"C\" __global__ void twice(float *x, int n) {\n"
          "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    if (i < n) x[i] = 2.0f * x[i];\n"
          "}\n",
          f);
    fclose(f);
    const char *src = ".tensors 1\n"
                      ".kernel twice cu \"/tmp/bib_test_devprog.cu\" params=ti\n"
                      ".func main regs=9\n    GPU_LAUNCH twice, r0, r6, 2\n    HALT r0\n.end\n";
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    bib_status_t st = assemble(src, &bytes, &size, &diag);
    if (st == BIB_OK) {
        bib_module_t *m;
        bib_diag_t d;
        cr_assert_eq(bib_module_read(bytes, size, &m, &d), BIB_OK, "%s", d.msg);
        cr_expect(strstr(m->kernels[0].ptx, ".entry twice") != NULL, "%s", m->kernels[0].ptx);
        bib_module_free(m);
        bib_free(bytes);
    } else {
        cr_expect(strstr(diag, "nvcc") != NULL, "%s", diag);
        bib_free(diag);
    }
    remove("/tmp/bib_test_devprog.cu");
}

/* ---- running on Vulkan --------------------------------------------------- */

Test(devprog_vulkan, user_shader_matches_the_cpu_through_the_executor) {
    bib_executor_config_t cfg = {.threads = 1, .device = NULL, .validation = true};
    bib_executor_t *ex = NULL;
    char why[512] = "";
    if (bib_vulkan_executor.init(&cfg, &ex, why, sizeof why) != BIB_OK) {
        printf("SKIP: %s\n", why);
        cr_skip_test("no Vulkan: %s", why);
    }
    uint32_t *words = NULL, count = 0;
    char *src = format_text(saxpy_program, saxpy_glsl), *diag = NULL;
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_OK, "%s", diag ? diag : "");
    bib_module_t *m;
    bib_diag_t d;
    cr_assert_eq(bib_module_read(bytes, size, &m, &d), BIB_OK, "%s", d.msg);
    words = m->shaders[0].spirv;
    count = m->shaders[0].words;
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    void *prog = NULL;
    cr_assert_eq(
        ops->program_create(ex, BIB_PROGRAM_SPIRV, words, count * 4u, "main", 2, 8, NULL, &prog),
        BIB_OK, "%s", ops->error(ex));
    enum { N = 1027 };
    float x[N], y[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.37f - 11.0f;
        y[i] = 1.0f / (float)(i + 1);
        volatile float p = 3.25f * x[i];
        want[i] = p + y[i];
    }
    void *bx, *by;
    cr_assert_eq(ops->buffer_alloc(ex, sizeof x, &bx), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(ex, sizeof y, &by), BIB_OK);
    cr_assert_eq(ops->upload(ex, bx, 0, x, sizeof x), BIB_OK);
    cr_assert_eq(ops->upload(ex, by, 0, y, sizeof y), BIB_OK);
    struct {
        float a;
        uint32_t n;
    } push = {3.25f, N};
    void *bufs[2] = {bx, by};
    uint64_t sizes[2] = {sizeof x, sizeof y};
    uint32_t groups[3] = {(N + 63) / 64, 1, 1};
    cr_assert_eq(ops->program_dispatch(ex, prog, bufs, sizes, 2, &push, 8, groups, NULL), BIB_OK,
                 "%s", ops->error(ex));
    cr_assert_eq(ops->submit(ex), BIB_OK, "%s", ops->error(ex));
    /* Work after a submit waits for it: a second dispatch doubles the step. */
    cr_assert_eq(ops->program_dispatch(ex, prog, bufs, sizes, 2, &push, 8, groups, NULL), BIB_OK);
    cr_assert_eq(ops->synchronize(ex), BIB_OK, "%s", ops->error(ex));
    cr_assert_eq(ops->download(ex, by, 0, got, sizeof got), BIB_OK);
    for (int i = 0; i < N; i++) {
        volatile float p = 3.25f * x[i];
        float twice = p + want[i];
        cr_expect_eq(memcmp(&got[i], &twice, 4), 0, "y[%d] = %a, CPU %a", i, got[i], twice);
    }
    ops->buffer_free(ex, bx);
    ops->buffer_free(ex, by);
    ops->program_destroy(ex, prog);
    cr_expect_eq(bib_vulkan_validation_messages(ex), 0, "the validation layer reported messages");
    ops->shutdown(ex);
    bib_module_free(m);
    bib_free(bytes);
    free(src);
}

Test(devprog_vulkan, vk_compute_in_a_program_matches_the_cpu) {
    bib_options_t options;
    bib_options_init(&options);
    options.validation = 1;
    bib_vm_t *vm;
    cr_assert_eq(bib_vm_create(&options, &vm), BIB_OK);
    char *src = format_text(saxpy_program, saxpy_glsl), *diag = NULL;
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_OK, "%s", diag ? diag : "");
    cr_assert_eq(bib_vm_load(vm, bytes, size, "saxpy"), BIB_OK, "%s", bib_vm_error(vm));
    int64_t mismatches = -1;
    bib_status_t st = bib_vm_run(vm, &mismatches);
    skip_without_vulkan(vm, st);
    cr_assert_eq(st, BIB_OK, "%s", bib_vm_error(vm));
    cr_expect_eq(mismatches, 0, "%lld elements differ from the CPU", (long long)mismatches);
    bib_vm_destroy(vm);
    bib_free(bytes);
    free(src);
}

/* A shader that writes an input's register in place (y += 2x, y given as
   ones) writes a copy of its own: the second run starts from the ones again. */
Test(devprog_vulkan, vk_compute_writing_an_input_leaves_it_for_the_next_run) {
    char *base = format_text(saxpy_program, saxpy_glsl);
    char *declared = replace_text(base, ".tensors 2\n", ".tensors 2\n.input y t1 f32[1000]\n");
    char *given = replace_text(declared, "    ALLOC t1, f32, r0, 1\n", "");
    char *src = replace_text(given, "    TSET t1, r8, r10\n", "");
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_OK, "%s", diag ? diag : "");
    bib_options_t options;
    bib_options_init(&options);
    options.validation = 1;
    bib_vm_t *vm;
    cr_assert_eq(bib_vm_create(&options, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "saxpy"), BIB_OK, "%s", bib_vm_error(vm));
    static float ones[1000];
    for (int i = 0; i < 1000; i++)
        ones[i] = 1;
    cr_assert_eq(bib_vm_set_input(vm, "y", BIB_DTYPE_F32, 1, (uint32_t[]){1000}, ones), BIB_OK,
                 "%s", bib_vm_error(vm));
    for (int run = 0; run < 2; run++) {
        int64_t mismatches = -1;
        bib_status_t st = bib_vm_run(vm, &mismatches);
        skip_without_vulkan(vm, st);
        cr_assert_eq(st, BIB_OK, "%s", bib_vm_error(vm));
        cr_expect_eq(mismatches, 0, "run %d: %lld elements differ from 2x + 1", run,
                     (long long)mismatches);
    }
    bib_vm_destroy(vm);
    bib_free(bytes);
    free(src);
    free(given);
    free(declared);
    free(base);
}

Test(devprog_vulkan, vk_compute_on_a_register_without_a_tensor_traps) {
    char *src = format_text(saxpy_program, saxpy_glsl), *diag = NULL;
    char *at = strstr(src, "LDI r5, 1\n");
    memcpy(at, "LDI r5, 7\n", 10); /* t7: beyond the 2 tensor registers */
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(assemble(src, &bytes, &size, &diag), BIB_OK, "%s", diag ? diag : "");
    bib_vm_t *vm;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "bad"), BIB_OK, "%s", bib_vm_error(vm));
    int64_t v;
    cr_expect_eq(bib_vm_run(vm, &v), BIB_E_TRAP);
    cr_expect(strstr(bib_vm_error(vm), "r5 holds 7, which names no tensor register") != NULL, "%s",
              bib_vm_error(vm));
    bib_vm_destroy(vm);
    bib_free(bytes);
    free(src);
}
