/* tests/unit/test_fileio.c: bounded reads and all-or-nothing writes
 * (vm/fileio.c), and the limits the library puts on files and inputs:
 * bib_options_t.max_file_size, bib_assemble_capped, inputs against
 * max_memory (bib_vm_set_input, bib_vm_set_input_fill). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/bib.h"
#include "vm/fileio.h"

static char dir[64];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/bib_test_fileio.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* How many entries the test folder holds (temporaries included). */
static int entries(void) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    cr_assert_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

TestSuite(fileio, .init = make_dir, .fini = remove_dir);

Test(fileio, read_stops_at_the_cap_on_a_device_without_a_size) {
    uint8_t *bytes = (uint8_t *)"x";
    size_t size = 7;
    char why[256];
    cr_assert_eq(bib_file_read("/dev/zero", 1 << 20, &bytes, &size, why, sizeof why), BIB_E_NOMEM);
    cr_assert_null(bytes);
    cr_assert_eq(size, 0);
    cr_assert_str_eq(why, "cannot read '/dev/zero': larger than the file size cap of 1048576 "
                          "bytes (--max-file-size raises it)");
}

Test(fileio, read_takes_a_file_of_exactly_the_cap_and_ends_it_with_a_nul) {
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/f", dir);
    char data[1000];
    memset(data, 'a', sizeof data);
    cr_assert_eq(bib_file_write(path, data, sizeof data, why, sizeof why), BIB_OK, "%s", why);
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(bib_file_read(path, 1000, &bytes, &size, why, sizeof why), BIB_OK, "%s", why);
    cr_assert_eq(size, 1000);
    cr_assert_eq(bytes[1000], 0);
    cr_assert_eq(memcmp(bytes, data, 1000), 0);
    free(bytes);
    cr_assert_eq(bib_file_read(path, 999, &bytes, &size, why, sizeof why), BIB_E_NOMEM);
}

Test(fileio, read_of_a_pipe_longer_than_its_first_pieces_is_whole) {
    /* More than the first 64 KiB piece, fed through a pipe (st_size 0). */
    char cmd[160], why[256];
    snprintf(cmd, sizeof cmd, "head -c 5000000 /dev/urandom > '%s/src'", dir);
    cr_assert_eq(system(cmd), 0);
    char src[128], fifo[128];
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("sh", "sh", "-c", "cat \"$1\" > \"$2\"", "sh", src, fifo, (char *)NULL);
        _exit(127);
    }
    uint8_t *piped, *plain;
    size_t piped_size, plain_size;
    cr_assert_eq(bib_file_read(fifo, 0, &piped, &piped_size, why, sizeof why), BIB_OK, "%s", why);
    cr_assert_eq(bib_file_read(src, 0, &plain, &plain_size, why, sizeof why), BIB_OK, "%s", why);
    cr_assert_eq(piped_size, 5000000);
    cr_assert_eq(plain_size, 5000000);
    cr_assert_eq(memcmp(piped, plain, plain_size), 0);
    free(piped);
    free(plain);
}

Test(fileio, read_names_the_reason) {
    uint8_t *bytes;
    size_t size;
    char why[256];
    cr_assert_eq(bib_file_read("/nonexistent/x", 0, &bytes, &size, why, sizeof why), BIB_E_IO);
    cr_assert_str_eq(why, "cannot open '/nonexistent/x': No such file or directory");
    cr_assert_eq(bib_file_read("/tmp", 0, &bytes, &size, why, sizeof why), BIB_E_IO);
    cr_assert_str_eq(why, "cannot read '/tmp': Is a directory");
}

/* Past RLIMIT_FSIZE (SIGXFSZ ignored: the write fails with EFBIG) the file
 * that was there is kept whole and no temporary file is left. */
Test(fileio, a_failed_write_keeps_the_old_file_and_leaves_nothing) {
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/out", dir);
    cr_assert_eq(bib_file_write(path, "old contents\n", 13, why, sizeof why), BIB_OK, "%s", why);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, small = {4096, 4096};
    getrlimit(RLIMIT_FSIZE, &old);
    small.rlim_max = old.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    static uint8_t big[100000];
    bib_status_t st = bib_file_write(path, big, sizeof big, why, sizeof why);
    setrlimit(RLIMIT_FSIZE, &old);
    cr_assert_eq(st, BIB_E_IO);
    char want[256];
    snprintf(want, sizeof want, "cannot write '%s': File too large", path);
    cr_assert_str_eq(why, want);
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(bib_file_read(path, 0, &bytes, &size, why, sizeof why), BIB_OK);
    cr_assert_eq(size, 13);
    cr_assert_eq(memcmp(bytes, "old contents\n", 13), 0);
    free(bytes);
    cr_assert_eq(entries(), 1);
}

Test(fileio, an_uncommitted_file_leaves_the_target_alone) {
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/out", dir);
    bib_file_out_t out;
    cr_assert_eq(bib_file_out_open(&out, path, why, sizeof why), BIB_OK, "%s", why);
    bib_file_out_write(&out, "new", 3);
    cr_assert_eq(bib_file_out_close(&out, why, sizeof why), BIB_OK, "%s", why);
    struct stat st;
    cr_assert_neq(stat(path, &st), 0, "the target appeared before the commit");
    bib_file_out_discard(&out);
    cr_assert_eq(entries(), 0);
}

Test(fileio, a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_mode) {
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/out", dir);
    mode_t mask = umask(022);
    cr_assert_eq(bib_file_write(path, "a", 1, why, sizeof why), BIB_OK, "%s", why);
    umask(mask);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(bib_file_write(path, "b", 1, why, sizeof why), BIB_OK, "%s", why);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
}

Test(fileio, writability_and_sameness_are_checked_before_writing) {
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/missing/out", dir);
    cr_assert_eq(bib_file_check_writable(path, why, sizeof why), BIB_E_IO);
    cr_assert(strstr(why, "No such file or directory") != NULL, "%s", why);
    cr_assert_eq(bib_file_check_writable(dir, why, sizeof why), BIB_E_IO);
    cr_assert(strstr(why, "Is a directory") != NULL, "%s", why);
    snprintf(path, sizeof path, "%s/out", dir);
    cr_assert_eq(bib_file_check_writable(path, why, sizeof why), BIB_OK, "%s", why);
    cr_assert_eq(entries(), 0, "the check created something");
    char other[160];
    snprintf(other, sizeof other, "%s/../%s/out", dir, strrchr(dir, '/') + 1);
    cr_assert(bib_file_same(path, other), "a name not yet created, spelt two ways");
    cr_assert_eq(bib_file_write(path, "a", 1, why, sizeof why), BIB_OK);
    cr_assert(bib_file_same(path, other), "an existing file, spelt two ways");
    snprintf(other, sizeof other, "%s/out2", dir);
    cr_assert_not(bib_file_same(path, other));
}

static const char *const one_input = ".input a t0 f32[?]\n"
                                     ".func main regs=1\n"
                                     "    HALT r0\n"
                                     ".end\n";

static bib_vm_t *vm_capped(uint64_t max_memory) {
    bib_options_t o;
    bib_options_init(&o);
    o.max_memory = max_memory;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_OK);
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(one_input, strlen(one_input), "t.basm", &bytes, &size, &diag),
                 BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "t"), BIB_OK, "%s", bib_vm_error(vm));
    bib_free(bytes);
    bib_free(diag);
    return vm;
}

static int fills;
static int fill_ones(void *ctx, void *data, size_t bytes) {
    (void)ctx;
    fills++;
    for (size_t i = 0; i < bytes / 4; i++)
        ((float *)data)[i] = 1.0f;
    return 0;
}
static int fill_fails(void *ctx, void *data, size_t bytes) {
    (void)ctx;
    (void)data;
    (void)bytes;
    return -1;
}

Test(inputs, an_input_over_the_memory_cap_is_refused_before_it_is_read) {
    bib_vm_t *vm = vm_capped(1 << 20);
    uint32_t dims[1] = {1 << 20}; /* 4 MiB of f32 */
    fills = 0;
    cr_assert_eq(bib_vm_set_input_fill(vm, "a", BIB_DTYPE_F32, 1, dims, fill_ones, NULL),
                 BIB_E_NOMEM);
    cr_assert_eq(fills, 0, "the data was read");
    cr_assert(strstr(bib_vm_error(vm), "input 'a': memory cap reached: 4194304 bytes") != NULL,
              "%s", bib_vm_error(vm));
    static float data[1 << 20];
    cr_assert_eq(bib_vm_set_input(vm, "a", BIB_DTYPE_F32, 1, dims, data), BIB_E_NOMEM);
    dims[0] = 1000;
    cr_assert_eq(bib_vm_set_input_fill(vm, "a", BIB_DTYPE_F32, 1, dims, fill_ones, NULL), BIB_OK);
    cr_assert_eq(fills, 1);
    bib_vm_destroy(vm);
}

Test(inputs, a_fill_that_fails_keeps_the_previous_value) {
    bib_vm_t *vm = vm_capped(0);
    uint32_t dims[1] = {3};
    float one[3] = {1, 2, 3};
    cr_assert_eq(bib_vm_set_input(vm, "a", BIB_DTYPE_F32, 1, dims, one), BIB_OK);
    uint32_t other[1] = {5};
    cr_assert_eq(bib_vm_set_input_fill(vm, "a", BIB_DTYPE_F32, 1, other, fill_fails, NULL),
                 BIB_E_IO);
    /* The run sees the 3 elements given first. */
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(limits, load_file_reads_at_most_max_file_size) {
    bib_options_t o;
    bib_options_init(&o);
    o.max_file_size = 4096;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load_file(vm, "/dev/zero"), BIB_E_NOMEM);
    cr_assert_str_eq(bib_vm_error(vm), "cannot read '/dev/zero': larger than the file size cap "
                                       "of 4096 bytes (--max-file-size raises it)");
    bib_vm_destroy(vm);
}

Test(limits, the_assembler_refuses_data_past_its_cap_at_the_line) {
    const char *src = ".func main regs=1\n    HALT r0\n.end\nd: .zero 5000\n";
    uint8_t *bytes = NULL;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(bib_assemble_capped(src, strlen(src), "c.basm", 4096, &bytes, &size, &diag),
                 BIB_E_NOMEM);
    cr_assert_null(bytes);
    cr_assert(strstr(diag, "c.basm:4:10: error: 5000 more bytes of data would make the module "
                           "larger than the size cap of 4096 bytes") != NULL,
              "%s", diag);
    bib_free(diag);
    cr_assert_eq(bib_assemble_capped(src, strlen(src), "c.basm", 8192, &bytes, &size, &diag),
                 BIB_OK);
    bib_free(bytes);
    bib_free(diag);
}

Test(fileio, a_long_path_is_quoted_by_its_start_and_end_whole_characters_only) {
    bib_path_quote_t q;
    const char *short_path = "out/y.npy";
    cr_assert_eq(bib_path_quote(short_path, &q), short_path);
    /* 300 bytes of two-byte characters (é), then ".npy". */
    char path[400] = "";
    for (int i = 0; i < 150; i++)
        strcat(path, "\xC3\xA9");
    strcat(path, ".npy");
    const char *text = bib_path_quote(path, &q);
    size_t n = strlen(text);
    cr_assert(n <= BIB_PATH_QUOTE_MAX, "%zu bytes", n);
    const char *dots = strstr(text, "...");
    cr_assert_not_null(dots);
    cr_assert_eq(strncmp(text, path, (size_t)(dots - text)), 0);
    cr_assert_eq((dots - text) % 2, 0, "the start splits a character: %s", text);
    cr_assert_str_eq(text + n - 4, ".npy");
    cr_assert_eq((unsigned char)dots[3], 0xC3, "the end starts inside a character: %s", text);
}

/* A field of /proc/self/status in KiB (VmRSS, VmHWM); -1 when absent. */
static long status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t n = strlen(field);
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kib = strtol(line + n + 1, NULL, 10);
    if (f != NULL)
        fclose(f);
    return kib;
}

/* A module of one constant of count values, copied to its output y. */
#define BIG_COUNT ((size_t)16 << 20) /* 64 MiB of f32 */

static float big_value(size_t i) {
    return (float)(i % 4099) - 2049.5f;
}

static void constant_module(size_t count, uint8_t **bytes, size_t *size) {
    float *data = malloc(count * sizeof *data);
    cr_assert_not_null(data);
    for (size_t i = 0; i < count; i++)
        data[i] = big_value(i);
    const int64_t dims[1] = {(int64_t)count};
    bib_builder_t *b = bib_builder_create();
    cr_assert_eq(bib_builder_tensor_const(b, "w", 0, BIB_DTYPE_F32, 1, dims, data), BIB_OK);
    free(data);
    cr_assert_eq(bib_builder_tensor_output(b, "y", 1, BIB_DTYPE_F32, 1, dims), BIB_OK);
    cr_assert_eq(bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1), BIB_OK);
    bib_builder_emit(b, (uint32_t)bib_opcode("COPY"), 1, 0, 0, 0);
    bib_builder_emit(b, (uint32_t)bib_opcode("HALT"), 0, 0, 0, 0);
    cr_assert_eq(bib_builder_end(b), BIB_OK);
    cr_assert_eq(bib_builder_finish(b, bytes, size), BIB_OK, "%s", bib_builder_error(b));
    bib_builder_destroy(b);
}

static void write_big_module(const char *path) {
    uint8_t *bytes;
    size_t size;
    constant_module(BIG_COUNT, &bytes, &size);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(bytes, 1, size, f), size);
    cr_assert_eq(fclose(f), 0);
    bib_free(bytes);
}

/* Runs vm's module and checks that y holds the constant's count values. */
static void expect_constant_out(bib_vm_t *vm, size_t count) {
    int64_t exit_value;
    cr_assert_eq(bib_vm_run(vm, &exit_value), BIB_OK, "%s", bib_vm_error(vm));
    bib_dtype_t dtype;
    uint32_t rank, dims[BIB_MAX_RANK];
    const void *out;
    cr_assert_eq(bib_vm_get_output(vm, "y", &dtype, &rank, dims, &out), BIB_OK);
    cr_assert_eq(rank, 1);
    cr_assert_eq(dims[0], count);
    const float *y = out;
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++)
        wrong += y[i] != big_value(i);
    cr_expect_eq(wrong, 0, "%zu of the constant's values changed on the way in", wrong);
}

/* bib_vm_load_file gives back the file's pages as it copies the constants
   out, so loading a 64 MiB constant raises the peak by about 64 MiB, not
   twice that; and the constant arrives whole. */
Test(fileio, load_file_holds_a_large_constant_once) {
    char path[128];
    snprintf(path, sizeof path, "%s/big.bib", dir);
    write_big_module(path);
    FILE *reset = fopen("/proc/self/clear_refs", "w");
    if (reset == NULL || fputs("5", reset) < 0 || fclose(reset) != 0 || status_kib("VmHWM") < 0)
        cr_skip_test(
            "SKIP: this kernel cannot reset the peak resident size (/proc/self/clear_refs)");
    long before = status_kib("VmRSS");
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load_file(vm, path), BIB_OK, "%s", bib_vm_error(vm));
    long grew = status_kib("VmHWM") - before;
    long once = (long)(BIG_COUNT * sizeof(float) >> 10);
    cr_expect_lt(grew, once + once / 4,
                 "loading raised the peak by %ld KiB for %ld KiB of constant", grew, once);
    expect_constant_out(vm, BIG_COUNT);
    bib_vm_destroy(vm);
}

/* A module from a named pipe, four times the pipe's buffer, arrives whole.
   bib_file_read_pages opens the pipe once and reads the stream from that
   descriptor: a second open would lose what the writer wrote in between,
   and could wait forever for a writer that is gone (a race this test meets
   only sometimes, not every run). */
Test(fileio, load_file_reads_a_named_pipe_once, .timeout = 30) {
    char path[128];
    snprintf(path, sizeof path, "%s/pipe.bib", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    const size_t count = 1 << 16; /* 256 KiB: four times a pipe's buffer */
    uint8_t *bytes;
    size_t size;
    constant_module(count, &bytes, &size);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int fd = open(path, O_WRONLY);
        size_t done = 0;
        while (fd >= 0 && done < size) {
            ssize_t n = write(fd, bytes + done, size - done);
            if (n <= 0)
                _exit(1);
            done += (size_t)n;
        }
        _exit(fd >= 0 ? 0 : 1);
    }
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load_file(vm, path), BIB_OK, "%s", bib_vm_error(vm));
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer was cut off");
    expect_constant_out(vm, count);
    bib_vm_destroy(vm);
    bib_free(bytes);
}
