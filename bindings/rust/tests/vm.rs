// Integration tests of the Rust bindings against the libbib that build.rs
// found (BIB_LIB_DIR or pkg-config), with the repository's examples.
use std::cell::RefCell;
use std::rc::Rc;

fn example(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn matmul_from_the_example_file() {
    let module = bib::Module::load(example("matmul.basm")).unwrap();
    let mut vm = bib::Vm::new(&bib::Options::new().backend("cpu").threads(1)).unwrap();
    vm.load(&module).unwrap();
    vm.set_input("A", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    vm.set_input("B", &[3, 2], &[7.0f32, 8.0, 9.0, 10.0, 11.0, 12.0]).unwrap();
    assert_eq!(vm.run().unwrap(), 0);
    let c = vm.output::<f32>("C").unwrap();
    assert_eq!(c.dims, vec![2, 2]);
    assert_eq!(c.data, vec![58.0, 64.0, 139.0, 154.0]);
    let err = vm.output::<i32>("C").unwrap_err();
    assert_eq!(err.status, bib::Status::Usage);
    assert!(err.message.contains("'C' is not i32"), "{err}");
}

#[test]
fn cpu_and_vulkan_give_the_same_bits() {
    let module = bib::Module::load(example("matmul.basm")).unwrap();
    let a: Vec<f32> = (0..35 * 19).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 77.0).collect();
    let b: Vec<f32> = (0..19 * 11).map(|i| ((i * 104729 % 997) as f32 - 498.0) / 31.0).collect();
    let run = |backend: &str| -> bib::Result<Vec<u32>> {
        let mut vm = bib::Vm::new(&bib::Options::new().backend(backend))?;
        vm.load(&module)?;
        vm.set_input("A", &[35, 19], &a)?;
        vm.set_input("B", &[19, 11], &b)?;
        vm.run()?;
        Ok(vm.output::<f32>("C")?.data.iter().map(|x| x.to_bits()).collect())
    };
    let cpu = run("cpu").unwrap();
    match run("vulkan") {
        Ok(vk) => assert_eq!(cpu, vk),
        Err(e) if e.status == bib::Status::Unavailable => eprintln!("SKIP vulkan: {e}"),
        Err(e) => panic!("vulkan: {e}"),
    }
}

#[test]
fn a_wrong_shape_names_the_tensor() {
    let module = bib::Module::load(example("matmul.basm")).unwrap();
    let mut vm = bib::Vm::new(&bib::Options::new()).unwrap();
    vm.load(&module).unwrap();
    vm.set_input("A", &[2, 3], &[0.0f32; 6]).unwrap();
    let err = vm.set_input("B", &[2, 2], &[0.0f32; 4]).unwrap_err();
    assert_eq!(err.message, "input 'B': expected f32[K,N] where K = 3, given f32[2,2]");
    let err = vm.set_input("B", &[3, 2], &[0.0f32; 4]).unwrap_err();
    assert!(err.message.contains("need 6 elements, the slice holds 4"), "{err}");
}

#[test]
fn traps_carry_pc_and_line_and_host_errors_become_traps() {
    let module = bib::Module::assemble(
        ".func main regs=2\n    LDI r0, 6\n    HOSTCALL r1, twice, r0, 1\n    HOSTCALL r0, print_i64, r1, 1\n    HOSTCALL r0, refuse, r1, 1\n    HALT r0\n.end\n",
        "host.basm",
    )
    .unwrap();
    let mut vm = bib::Vm::new(&bib::Options::new()).unwrap();
    let printed = Rc::new(RefCell::new(Vec::new()));
    let sink = printed.clone();
    vm.register_output(move |b| sink.borrow_mut().extend_from_slice(b)).unwrap();
    vm.register_host("twice", |args| Ok(args[0] * 2)).unwrap();
    vm.register_host("refuse", |args| Err(format!("will not take {}", args[0]))).unwrap();
    vm.load(&module).unwrap();
    let err = vm.run().unwrap_err();
    assert_eq!(err.status, bib::Status::Trap);
    assert_eq!((err.pc(), err.line()), (Some(3), Some(5)), "{err}");
    assert!(err.message.contains("will not take 12"), "{err}");
    assert_eq!(&*printed.borrow(), b"12\n");
}

#[test]
fn fuel_and_assembly_errors() {
    let module = bib::Module::assemble(".func main regs=1\ntop:\n    ADDI r0, r0, 1\n    JMP top\n.end\n", "loop.basm").unwrap();
    let mut vm = bib::Vm::new(&bib::Options::new().fuel(10)).unwrap();
    vm.load(&module).unwrap();
    let err = vm.run().unwrap_err();
    assert!(err.message.contains("fuel exhausted (10 instructions)"), "{err}");
    assert_eq!(vm.stats().instructions, 10);
    let err = bib::Module::assemble(".func main\n    ADDD r0\n.end\n", "bad.basm").unwrap_err();
    assert_eq!(err.status, bib::Status::Asm);
    assert!(err.message.starts_with("bad.basm:2:5: error: unknown mnemonic 'ADDD'"), "{err}");
    let err = bib::Module::load("/nonexistent.bib").unwrap_err();
    assert_eq!(err.status, bib::Status::Io);
}

#[test]
fn builder_module_runs_and_disassembles() {
    let mut b = bib::Builder::new();
    let main = b.declare("main").unwrap();
    let done = b.label();
    b.begin(main, 0, 2).unwrap();
    b.emit("LDI", [0, 6, 0, 0]).unwrap().emit("LDI", [1, 7, 0, 0]).unwrap();
    b.emit("MUL", [0, 0, 1, 0]).unwrap().emit("JMP", [done, 0, 0, 0]).unwrap();
    b.bind(done).unwrap().emit("HALT", [0, 0, 0, 0]).unwrap().end().unwrap();
    let module = b.finish().unwrap();
    let mut vm = bib::Vm::new(&bib::Options::new()).unwrap();
    vm.load(&module).unwrap();
    assert_eq!(vm.run().unwrap(), 42);
    let text = module.disassemble().unwrap();
    assert_eq!(bib::Module::assemble(&text, "again.basm").unwrap(), module);
    assert!(b.emit("NOPE", [0; 4]).is_err());
    assert!(bib::build_info().starts_with("bib 0."));
}

#[test]
fn the_load_policy_options_reach_the_vm() {
    let module = bib::Module::assemble(
        ".func main regs=2\n    HOSTCALL r1, print_i64, r0, 1\n    HALT r1\n.end\n",
        "p.basm",
    )
    .unwrap();
    let mut vm = bib::Vm::new(&bib::Options::new().allow_hosts(&["print_f64"]).device_timeout_ms(5000)).unwrap();
    vm.register_output(|_| {}).unwrap();
    let err = vm.load(&module).unwrap_err();
    assert_eq!(err.status, bib::Status::Verify);
    assert!(err.message.contains("print_i64"), "{err}");
    let shader = bib::Module::load(example("vk_custom.basm")).unwrap();
    let mut vm = bib::Vm::new(&bib::Options::new().deny_device_code(true)).unwrap();
    assert_eq!(vm.load(&shader).unwrap_err().status, bib::Status::Verify);
}
