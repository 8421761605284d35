//! The guest ABI against hostile and edge-case guests on the node runtime, one row of a table
//! each (spinning, memory bombs, bad pointers, refused params): every row must end with its
//! own clear result while the runtime keeps serving.

use spear_tests::guest_node::{context, guest, limits, node, task};
use spear_tests::guest_wat::{refused_then_last_error, write_param, EXIT};
use spearlet::invoke::RunContext;
use spearlet::tool_policy::TaskPolicy;

/// What a hostile case must end with.
enum Expect {
    /// The guest exits with this code (an errno it was given, or 0).
    Exit(i32),
    /// The run is stopped with an error containing this.
    Stopped(&'static str),
    /// Exit code and this text on stdout.
    ExitSaying(i32, &'static str),
    /// The module is refused when loaded, with this in the sentence.
    Refused(&'static str),
}

/// One row of the ABI table.
struct Case {
    name: &'static str,
    wat: String,
    task: TaskPolicy,
    expect: Expect,
}

fn case(name: &'static str, wat: impl Into<String>, expect: Expect) -> Case {
    Case {
        name,
        wat: wat.into(),
        task: task(),
        expect,
    }
}

/// The hostile and edge cases of the guest ABI, one row each.
fn abi_cases() -> Vec<Case> {
    let forbidding = TaskPolicy {
        enabled: false,
        ..task()
    };
    vec![
        case(
            "a spinning guest is stopped at its CPU budget",
            r#"(module (memory (export "memory") 1) (func (export "_start") (loop br 0)))"#,
            Expect::Stopped("CPU budget"),
        ),
        case(
            "a memory bomb is stopped at its memory limit",
            r#"(module (memory (export "memory") 1) (func (export "_start") (loop (drop (memory.grow (i32.const 256))) br 0)))"#,
            Expect::Stopped("memory"),
        ),
        case(
            "growth past the limits is -1, as WebAssembly says, and the guest goes on",
            format!(
                r#"(module {EXIT}
                (memory (export "memory") 1)
                (table 1 funcref)
                (func (export "_start")
                  ;; 128 MiB of memory (past the run's 64 MiB) and 100,000
                  ;; table elements (past 10,000): each refused with -1.
                  (if (i32.ne (memory.grow (i32.const 2048)) (i32.const -1))
                    (then (call $exit (i32.const 1))))
                  (if (i32.ne (table.grow (ref.null func) (i32.const 100000)) (i32.const -1))
                    (then (call $exit (i32.const 2))))
                  ;; Growth within the limits still works.
                  (if (i32.ne (memory.grow (i32.const 1)) (i32.const 1))
                    (then (call $exit (i32.const 3))))
                  (call $exit (i32.const 42))))"#
            ),
            Expect::Exit(42),
        ),
        case(
            "a module declaring 4 GiB of memory is refused, in MiB",
            r#"(module (memory 65536) (func (export "_start")))"#,
            Expect::Refused("declares 4096 MiB of memory at start; this node gives a guest at most 256 MiB (the most limits.memory_mb may be)"),
        ),
        case(
            "a module declaring two memories is refused",
            r#"(module (memory 1) (memory 1) (func (export "_start")))"#,
            Expect::Refused("declares 2 memories; a guest may have one"),
        ),
        case(
            "a module declaring a table past the limit is refused",
            r#"(module (table 100000 funcref) (func (export "_start")))"#,
            Expect::Refused("a table of 100000 elements at start; a guest may have at most 10000"),
        ),
        case(
            "a module needing more memory at start than its run's limit does not start, in MiB",
            r#"(module (memory 2048) (func (export "_start")))"#,
            Expect::Stopped("the module could not start: it tried to grow its memory past its limit of 64 MiB (limits.memory_mb), to 128 MiB"),
        ),
        case(
            "unbounded recursion is stopped by the stack limit",
            r#"(module (memory (export "memory") 1) (func $f (call $f)) (func (export "_start") (call $f)))"#,
            Expect::Stopped("stack"),
        ),
        case(
            "an out-of-bounds pointer and length is -EFAULT",
            format!(
                r#"(module {EXIT}
                (import "spear" "cchat_create" (func $create (result i32)))
                (import "spear" "cchat_write_msg" (func $write (param i32 i32 i32 i32 i32) (result i32)))
                (memory (export "memory") 1)
                (func (export "_start")
                  (call $exit (i32.sub (i32.const 0)
                    (call $write (call $create) (i32.const 65530) (i32.const 100) (i32.const 0) (i32.const 4))))))"#
            ),
            Expect::Exit(14),
        ),
        case(
            "an absurd output capacity at the end of memory is -EFAULT",
            format!(
                r#"(module {EXIT}
                (import "spear" "cchat_create" (func $create (result i32)))
                (import "spear" "cchat_ctl_get_param" (func $get (param i32 i32 i32 i32 i32) (result i32)))
                (memory (export "memory") 1)
                (data (i32.const 0) "mcp.server_ids")
                (data (i32.const 100) "\ff\ff\ff\ff")
                (func (export "_start")
                  (call $exit (i32.sub (i32.const 0)
                    (call $get (call $create) (i32.const 0) (i32.const 14) (i32.const 65533) (i32.const 100))))))"#
            ),
            Expect::Exit(14),
        ),
        case(
            "thousands of sessions never closed hit -EMFILE",
            format!(
                r#"(module {EXIT}
                (import "spear" "cchat_create" (func $create (result i32)))
                (memory (export "memory") 1)
                (func (export "_start") (local $i i32) (local $r i32)
                  (loop $again
                    (local.set $r (call $create))
                    (if (i32.lt_s (local.get $r) (i32.const 0)) (then (call $exit (i32.sub (i32.const 0) (local.get $r)))))
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $again (i32.lt_u (local.get $i) (i32.const 5000))))))"#
            ),
            Expect::Exit(24),
        ),
        case(
            "writing a task key is -EACCES",
            write_param("mcp.task_tool_denylist", "[]"),
            Expect::Exit(13),
        ),
        case(
            "server_ids outside the task's set is -EACCES",
            write_param("mcp.server_ids", r#"["fs","other"]"#),
            Expect::Exit(13),
        ),
        case(
            "server_ids within the task's set is accepted",
            write_param("mcp.server_ids", r#"["fs"]"#),
            Expect::Exit(0),
        ),
        Case {
            name: "enabling MCP where the task forbids it is -EACCES",
            task: forbidding.clone(),
            ..case("", write_param("mcp.enabled", "true"), Expect::Exit(13))
        },
        Case {
            name: "disabling MCP where the task forbids it is accepted",
            task: forbidding,
            ..case("", write_param("mcp.enabled", "false"), Expect::Exit(0))
        },
        case(
            "enabling MCP where the task enables it is accepted",
            write_param("mcp.enabled", "true"),
            Expect::Exit(0),
        ),
        case(
            "cchat_last_error hands back the refusal's sentence",
            refused_then_last_error("mcp.server_ids", r#"["fs","other"]"#),
            Expect::ExitSaying(
                13,
                "server 'other' is not in the task's mcp.allowed_server_ids",
            ),
        ),
        case(
            "a misspelled key is -ENOENT, and lists the keys there are",
            refused_then_last_error("temprature", "0.5"),
            Expect::ExitSaying(
                2,
                "unknown param 'temprature'; request params are backend, model, temperature",
            ),
        ),
        case(
            "a value that is not JSON is -EINVAL, and says so",
            refused_then_last_error("mcp.server_ids", "[fs"),
            Expect::ExitSaying(22, "the value for mcp.server_ids is not JSON"),
        ),
        case(
            "cchat_send with unknown flags is -EINVAL",
            format!(
                r#"(module {EXIT}
                (import "spear" "cchat_create" (func $create (result i32)))
                (import "spear" "cchat_send" (func $send (param i32 i32) (result i32)))
                (memory (export "memory") 1)
                (func (export "_start")
                  (call $exit (i32.sub (i32.const 0) (call $send (call $create) (i32.const 6))))))"#
            ),
            Expect::Exit(22),
        ),
        case(
            "cchat_recv before any send is -ENOENT",
            format!(
                r#"(module {EXIT}
                (import "spear" "cchat_create" (func $create (result i32)))
                (import "spear" "cchat_recv" (func $recv (param i32 i32 i32) (result i32)))
                (memory (export "memory") 1)
                (data (i32.const 100) "\00\01\00\00")
                (func (export "_start")
                  (call $exit (i32.sub (i32.const 0) (call $recv (call $create) (i32.const 200) (i32.const 100))))))"#
            ),
            Expect::Exit(2),
        ),
    ]
}

/// Every row of [`abi_cases`] runs and reports on its own; the test fails
/// listing every row that did not hold. Then a normal guest still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guests_end_with_a_clear_error_and_the_node_keeps_serving() {
    let node = node().await;
    let mut failed = Vec::new();
    for case in abi_cases() {
        let pre = match (node.runtime.load(case.wat.as_bytes()), &case.expect) {
            (Ok(pre), _) => pre,
            (Err(error), Expect::Refused(text)) if error.to_string().contains(text) => continue,
            (Err(error), _) => {
                failed.push(format!("{}: does not load: {error}", case.name));
                continue;
            }
        };
        let context = RunContext {
            scope: Default::default(),
            task: case.task,
            ..context(&node, "")
        };
        let outcome = spearlet::invoke::run(&node.runtime, &pre, context, limits()).await;
        let stdout = String::from_utf8_lossy(&outcome.stdout);
        let held = match case.expect {
            Expect::Exit(code) => outcome.exit_code == Some(code),
            Expect::Stopped(text) => outcome.error.as_deref().is_some_and(|e| e.contains(text)),
            Expect::ExitSaying(code, text) => {
                outcome.exit_code == Some(code) && stdout.contains(text)
            }
            Expect::Refused(_) => false,
        };
        let verdict = if held { "ok" } else { "FAILED" };
        eprintln!(
            "abi case {}: {verdict} (exit {:?}, error {:?}, stdout {stdout:?})",
            case.name, outcome.exit_code, outcome.error
        );
        if !held {
            failed.push(case.name.to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "ABI cases that did not hold: {failed:#?}"
    );

    // After all that, a normal guest still runs.
    let pre = node.runtime.load(&guest("fs-agent")).unwrap();
    let outcome =
        spearlet::invoke::run(&node.runtime, &pre, context(&node, "again"), limits()).await;
    assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
    node.connections.shutdown().await;
}
