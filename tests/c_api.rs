//! Tests of the C ABI from C, C++ and MPI (issue 6; README "C API"): compiles the examples of
//! `c_examples/` and the C test program `tests/c_api/api_test.c` against the static and shared
//! libraries built with this test, runs them on the bundled sample, and checks their output
//! against `ctf dump` and `ctf read --jsonl`. The C test program also runs under valgrind
//! memcheck, and the MPI example under `mpirun -np 2` and `-np 3`. `tests/c_api/composite.c`
//! reads a composite reader (issue 9) on data written by the test and checked against it
//! (`tests/composite_support`). A test skips (with a
//! printed note) only when its tool (valgrind, mpicc/mpirun, make, cc) is absent; CI installs
//! them.

#[allow(dead_code)]
mod cli_support;
mod composite_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use cli_support::json::{self, Json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CTF: &str = env!("CARGO_BIN_EXE_ctf");
const CONFIG: &str = "examples/pos.cntk";

/// The directory holding the `libctf_reader.a` and `.so` built with this test: the `deps`
/// directory of this test binary (cargo builds every crate type of the library there, and
/// copies them up to `target/<profile>` only for `cargo build`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let dir = exe
        .parent()
        .expect("the test binary sits in target/<profile>/deps")
        .to_path_buf();
    assert!(
        dir.join("libctf_reader.a").exists() && dir.join("libctf_reader.so").exists(),
        "libctf_reader.a/.so not found in {} (crate-type staticlib and cdylib)",
        dir.display()
    );
    dir
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a command in the repository root; panics with its output unless it exits 0.
fn run_ok(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(ROOT)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{} {args:?} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        program.display(),
        out.status
    );
    stdout
}

/// Where the examples were built (once per test binary), or None when make or a C compiler
/// is missing.
struct Built {
    _dir: tempfile::TempDir,
    bin: PathBuf,
}

fn examples() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !have("make") || !have("cc") || !have("c++") {
                println!("note: make, cc or c++ not found: the C examples are not built");
                return None;
            }
            let dir = tempfile::tempdir().expect("temporary directory");
            let bin = dir.path().join("bin");
            let out = Command::new("make")
                .arg("-C")
                .arg(Path::new(ROOT).join("c_examples"))
                .arg("examples")
                .arg(format!("BUILD={}", bin.display()))
                .arg(format!("LIBDIR={}", lib_dir().display()))
                .output()
                .expect("make runs");
            let (stdout, stderr) = text(&out);
            assert!(
                out.status.success(),
                "building the examples failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
            );
            Some(Built { _dir: dir, bin })
        })
        .as_ref()
}

/// The system libraries a static link of the library needs (its pkg-config `Libs.private`).
const STATIC_LIBS: [&str; 7] = [
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// Compiles the C11 program `source` into `exe` against the static library, with the
/// warnings of the examples (`-Werror`); panics with the compiler's output on failure.
fn compile_c(source: &Path, exe: &Path) {
    compile("cc", "-std=c11", source, exe);
}

/// Compiles `source` with `compiler` and its language standard `std` into `exe` against the
/// static library, with the warnings of the examples (`-Werror`); panics with the compiler's
/// output on failure.
fn compile(compiler: &str, std: &str, source: &Path, exe: &Path) {
    let out = Command::new(compiler)
        .args([std, "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-g"])
        .arg(format!("-I{ROOT}/include"))
        .arg(source)
        .arg(lib_dir().join("libctf_reader.a"))
        .args(STATIC_LIBS)
        .arg("-o")
        .arg(exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "compiling {} failed\nstdout:\n{stdout}\nstderr:\n{stderr}",
        source.display()
    );
}

/// The C test program, compiled once with the warnings of the examples.
fn api_test() -> Option<&'static (tempfile::TempDir, PathBuf)> {
    static BUILT: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !have("cc") {
                println!("note: cc not found: the C test program is not built");
                return None;
            }
            let dir = tempfile::tempdir().expect("temporary directory");
            let exe = dir.path().join("api_test");
            compile_c(&Path::new(ROOT).join("tests/c_api/api_test.c"), &exe);
            Some((dir, exe))
        })
        .as_ref()
}

/// The composite reader through the C ABI (`tests/c_api/composite.c`): from a file, from
/// text and from the builder (`ctf_config_add_deserializer`), the same joined minibatches,
/// checked against the data written here; under valgrind memcheck when installed.
#[test]
fn c_composite_reader_joins_deserializers_by_key() {
    if !have("cc") {
        println!("note: cc not found: the composite C test is not built");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("composite");
    compile_c(&Path::new(ROOT).join("tests/c_api/composite.c"), &exe);
    let case = composite_support::CCase::write(dir.path());
    let stdout = if have("valgrind") {
        memcheck(&exe, &case.args())
    } else {
        run_ok(&exe, &case.args())
    };
    case.check(&stdout);
}

fn parse_json_lines(stdout: &str) -> Vec<Json> {
    stdout
        .lines()
        .map(|l| json::parse(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// `ctf dump examples/pos.cntk`: the keys in file order and the sum of the `features` values
/// (f32, summed as f64 in file order).
fn dump() -> (Vec<u64>, f64) {
    let stdout = run_ok(Path::new(CTF), &["dump", CONFIG]);
    let mut keys = Vec::new();
    let mut sum = 0f64;
    for line in parse_json_lines(&stdout) {
        keys.push(line.at("key").int());
        for sample in line.at("inputs").at("features").arr() {
            for v in sample.arr() {
                sum += f64::from(v.num().parse::<f32>().expect("a float"));
            }
        }
    }
    (keys, sum)
}

fn csv_u64(text: &str) -> Vec<u64> {
    text.split(',')
        .map(|k| k.parse().expect("an integer"))
        .collect()
}

#[test]
fn version_macros_match_cargo_toml() {
    let toml = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap();
    let version = toml
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("Cargo.toml has a version line");
    let header = std::fs::read_to_string(Path::new(ROOT).join("include/ctf_reader.h")).unwrap();
    let define = |name: &str| {
        header
            .lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("the header defines {name}"))
            .trim()
            .to_string()
    };
    let from_header = format!(
        "{}.{}.{}",
        define("CTF_READER_VERSION_MAJOR"),
        define("CTF_READER_VERSION_MINOR"),
        define("CTF_READER_VERSION_PATCH")
    );
    assert_eq!(from_header, version);
}

#[test]
fn c_test_program_exercises_every_function() {
    let Some((_, exe)) = api_test() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let stdout = run_ok(exe, &[ROOT, scratch.path().to_str().unwrap()]);
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.ends_with(" passed, 0 failed"), "{stdout}");
    let passed: u32 = last.split(' ').next().unwrap().parse().unwrap();
    assert!(passed > 500, "{stdout}");

    // Every exported function of the header is called by the test program.
    let header = std::fs::read_to_string(Path::new(ROOT).join("include/ctf_reader.h")).unwrap();
    let source = std::fs::read_to_string(Path::new(ROOT).join("tests/c_api/api_test.c")).unwrap();
    let functions: BTreeSet<&str> = header
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .zip(
            header
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .skip(1),
        )
        .filter(|(_, b)| b.starts_with("ctf_"))
        .map(|(_, b)| b)
        .filter(|name| {
            header.contains(&format!(" {name}(")) || header.contains(&format!("*{name}("))
        })
        .collect();
    assert!(functions.len() >= 45, "{functions:?}");
    for f in &functions {
        assert!(
            source.contains(&format!("{f}(")),
            "api_test.c never calls {f}"
        );
    }

    // An unrandomized sweep: the keys and the features checksum of `ctf dump`, and every
    // byte of the file read once.
    let (keys, sum) = dump();
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} line in\n{stdout}"))
            .to_string()
    };
    assert_eq!(csv_u64(&field("keys")), keys);
    assert_eq!(field("features_sum").parse::<f64>().unwrap(), sum);
    let size = std::fs::metadata(Path::new(ROOT).join("examples/pos.ctf"))
        .unwrap()
        .len();
    assert_eq!(field("bytes_read").parse::<u64>().unwrap(), size);
}

/// Runs `program args` under valgrind memcheck in the repository root: no invalid access, no
/// definite or indirect leak. (A "possibly lost" block remains by design: std's handle of a
/// thread it did not start, the C main thread, lives in that thread's TLS until exit.)
fn memcheck(program: &Path, args: &[&str]) -> String {
    let out = Command::new("valgrind")
        .args([
            "--error-exitcode=99",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect",
        ])
        .arg(program)
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("valgrind runs");
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "valgrind reported errors ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stderr.contains("ERROR SUMMARY: 0 errors"), "{stderr}");
    let freed = stderr.contains("All heap blocks were freed");
    assert!(
        freed || stderr.contains("definitely lost: 0 bytes"),
        "{stderr}"
    );
    assert!(
        freed || stderr.contains("indirectly lost: 0 bytes"),
        "{stderr}"
    );
    stdout
}

#[test]
fn c_test_program_under_valgrind_has_no_errors_or_leaks() {
    if !have("valgrind") {
        println!("note: valgrind not found (Debian: valgrind): memcheck run skipped");
        return;
    }
    let Some((_, exe)) = api_test() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let stdout = memcheck(exe, &[ROOT, scratch.path().to_str().unwrap()]);
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

#[test]
fn examples_under_valgrind_have_no_errors_or_leaks() {
    if !have("valgrind") {
        println!("note: valgrind not found (Debian: valgrind): memcheck run skipped");
        return;
    }
    let Some(built) = examples() else { return };
    let stdout = memcheck(&built.bin.join("train"), &[CONFIG, "16", "3"]);
    assert!(stdout.contains("minibatches identical"), "{stdout}");
    let stdout = memcheck(&built.bin.join("stats"), &[CONFIG, "4*1:20", "2"]);
    assert!(stdout.contains("total minibatches"), "{stdout}");
}

/// `stats` lines against `ctf read --jsonl` with the same size or schedule and sweeps.
fn check_stats(exe: &Path, schedule: &str, sweeps: &str) {
    let stdout = run_ok(exe, &[CONFIG, schedule, sweeps]);
    let expected = parse_json_lines(&run_ok(
        Path::new(CTF),
        &[
            "read",
            "--jsonl",
            CONFIG,
            "--mb-size",
            schedule,
            "--max-sweeps",
            sweeps,
        ],
    ));
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("mb ")).collect();
    assert_eq!(lines.len(), expected.len(), "{stdout}");
    let names = ["words", "features", "tags"];
    for (line, want) in lines.iter().zip(&expected) {
        let f: Vec<&str> = line.split(' ').collect();
        // mb I keys K,.. samples S,.. checksum C,.. sweep_end B position P checkpoint T
        assert_eq!(f[1].parse::<u64>().unwrap(), want.at("mb").int(), "{line}");
        let keys: Vec<u64> = want.at("sequences").arr().iter().map(Json::int).collect();
        assert_eq!(csv_u64(f[3]), keys, "{line}");
        let samples: Vec<u64> = names
            .iter()
            .map(|n| want.at("samples").at(n).int())
            .collect();
        assert_eq!(csv_u64(f[5]), samples, "{line}");
        let sums: Vec<f64> = f[7].split(',').map(|s| s.parse().unwrap()).collect();
        for (got, name) in sums.iter().zip(names) {
            let expect: f64 = want.at("checksum").at(name).num().parse().unwrap();
            assert_eq!(*got, expect, "{name} in {line}");
        }
        assert_eq!(
            f[9] == "1",
            want.at("sweep_end") == &Json::Bool(true),
            "{line}"
        );
        assert_eq!(
            f[11].parse::<u64>().unwrap(),
            want.at("position").int(),
            "{line}"
        );
        assert_eq!(
            Json::Str(f[13].to_string()),
            *want.at("checkpoint"),
            "the C checkpoint bytes are the CLI's token"
        );
    }
    let stream_lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("stream "))
        .collect();
    assert_eq!(
        stream_lines,
        [
            "stream 0 words alias w dim 1000 sparse float",
            "stream 1 features alias x dim 3 dense float",
            "stream 2 tags alias t dim 12 sparse float"
        ]
    );
}

#[test]
fn c_stats_example_matches_ctf_read() {
    let Some(built) = examples() else { return };
    check_stats(&built.bin.join("stats"), "16", "1");
    check_stats(&built.bin.join("stats"), "4*1:20", "3");
}

#[test]
fn c_stats_example_linked_dynamically_matches_ctf_read() {
    let Some(built) = examples() else { return };
    check_stats(&built.bin.join("stats_shared"), "7", "2");
}

/// The shared library has an ELF SONAME of its ABI (README "C API"): `libctf_reader.so.0.MINOR`
/// while the major version is 0, else `.so.MAJOR`; a program linked against it needs that
/// name. It had none, so a program needed `libctf_reader.so`, whatever its ABI.
#[test]
fn the_shared_library_has_the_soname_of_its_abi() {
    if !have("readelf") {
        println!("note: readelf not found (Debian: binutils): SONAME check skipped");
        return;
    }
    let (major, minor) = (
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
    );
    let soname = if major == "0" {
        format!("libctf_reader.so.0.{minor}")
    } else {
        format!("libctf_reader.so.{major}")
    };
    let dynamic = |file: &Path| {
        let out = Command::new("readelf")
            .arg("-d")
            .arg(file)
            .output()
            .expect("readelf runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let library = dynamic(&lib_dir().join("libctf_reader.so"));
    assert!(
        library.contains(&format!("Library soname: [{soname}]")),
        "{library}"
    );
    let Some(built) = examples() else { return };
    let program = dynamic(&built.bin.join("stats_shared"));
    assert!(
        program.contains(&format!("Shared library: [{soname}]")),
        "{program}"
    );
}

#[test]
fn cpp_training_loop_resumes_from_its_checkpoint() {
    let Some(built) = examples() else { return };
    let stdout = run_ok(&built.bin.join("train"), &[CONFIG, "16", "3"]);
    let expected = parse_json_lines(&run_ok(
        Path::new(CTF),
        &[
            "read",
            "--jsonl",
            CONFIG,
            "--mb-size",
            "16",
            "--max-sweeps",
            "2",
        ],
    ));
    let steps: Vec<Vec<u64>> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("step "))
        .map(|l| csv_u64(l.split(' ').nth(2).unwrap()))
        .collect();
    let want: Vec<Vec<u64>> = expected
        .iter()
        .map(|m| m.at("sequences").arr().iter().map(Json::int).collect())
        .collect();
    assert_eq!(steps, want);
    assert!(
        stdout.contains(&format!(
            "resumed after step 3: {} minibatches identical",
            want.len() - 4
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("malformed checkpoint rejected: checkpoint error"),
        "{stdout}"
    );
}

/// The C++ wrapper's contracts (`tests/c_api/wrapper_test.cpp`): each `ctf::Error` carries
/// the message of the call that failed (the wrapper read the thread's message before the
/// call that replaced it, and so from freed memory), a moved-from `ctf::Minibatch` is empty
/// (it kept the views of the minibatch it gave away), an empty checkpoint is a checkpoint
/// error (it was a NULL argument); under valgrind memcheck too when installed.
#[test]
fn cpp_wrapper_errors_moves_and_empty_checkpoints() {
    if !have("c++") {
        println!("note: c++ not found: the C++ wrapper test is not built");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("wrapper_test");
    compile(
        "c++",
        "-std=c++17",
        &Path::new(ROOT).join("tests/c_api/wrapper_test.cpp"),
        &exe,
    );
    let stdout = run_ok(&exe, &[]);
    assert!(stdout.trim_end().ends_with(" passed, 0 failed"), "{stdout}");
    if have("valgrind") {
        let stdout = memcheck(&exe, &[]);
        assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    }
}

#[test]
fn headers_compile_twice_in_one_cpp_translation_unit() {
    let Some(built) = examples() else { return };
    let stdout = run_ok(&built.bin.join("double_include"), &[]);
    assert_eq!(
        stdout.trim(),
        format!("version {}", env!("CARGO_PKG_VERSION"))
    );
}

/// `ctf_reader.h` compiles without a warning, included twice, under the oldest standards
/// README "C API" promises: C99 and C++11 (C89 has no `//` comments nor trailing commas in
/// enums, both of which cbindgen writes).
#[test]
fn c_header_compiles_pedantically_as_c99_and_cpp11() {
    if !have("cc") || !have("c++") {
        println!("note: cc/c++ not found: header standards test skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = "#include \"ctf_reader.h\"\n#include \"ctf_reader.h\"\n\
                  int main(void) { return ctf_version()[0] == 0; }\n";
    for (compiler, std, name) in [("cc", "-std=c99", "t.c"), ("c++", "-std=c++11", "t.cpp")] {
        let path = dir.path().join(name);
        std::fs::write(&path, source).unwrap();
        compile(compiler, std, &path, &dir.path().join("t"));
    }
}

#[test]
fn mpi_ranks_cover_the_corpus_once_per_sweep() {
    if !have("mpicc") || !have("mpirun") {
        println!(
            "note: mpicc/mpirun not found (Debian: openmpi-bin libopenmpi-dev): MPI test skipped"
        );
        return;
    }
    let Some(built) = examples() else { return };
    let (keys, _) = dump();
    let corpus = keys
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let exe = built.bin.join("mpi_shares");
    for ranks in ["2", "3"] {
        let mut args = vec!["--oversubscribe"];
        // OpenMPI refuses to run as root without --allow-run-as-root.
        let uid = Command::new("id").arg("-u").output().map(|o| text(&o).0);
        if uid.is_ok_and(|u| u.trim() == "0") {
            args.push("--allow-run-as-root");
        }
        args.extend(["-np", ranks, exe.to_str().unwrap(), CONFIG, "8", "2"]);
        let stdout = run_ok(Path::new("mpirun"), &args);
        assert!(
            stdout.contains(&format!("corpus keys {corpus}\n")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "{ranks} ranks, 2 sweeps: {} sequences, 164 samples (sweep 82 samples): every sequence read exactly once per sweep",
                2 * keys.len()
            )),
            "{stdout}"
        );
        let per_rank: u64 = stdout
            .lines()
            .filter(|l| l.starts_with("rank "))
            .map(|l| l.split(' ').nth(4).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(per_rank, 2 * keys.len() as u64, "{stdout}");
        assert_eq!(
            stdout.lines().filter(|l| l.starts_with("rank ")).count(),
            ranks.parse::<usize>().unwrap()
        );
    }
}

#[test]
fn readme_c_program_compiles_and_reads_two_sweeps() {
    if !have("cc") {
        println!("note: cc not found: the README program is not compiled");
        return;
    }
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let chapter = &readme[readme
        .find("\n## C API\n")
        .expect("README has a C API chapter")..];
    let start = chapter.find("```c\n").expect("the chapter has a C program") + 5;
    let program = &chapter[start..start + chapter[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("minimal.c"), program).unwrap();
    let exe = dir.path().join("minimal");
    compile_c(&dir.path().join("minimal.c"), &exe);
    let stdout = run_ok(&exe, &[]);
    let expected = parse_json_lines(&run_ok(
        Path::new(CTF),
        &[
            "read",
            "--jsonl",
            CONFIG,
            "--mb-size",
            "64",
            "--max-sweeps",
            "2",
        ],
    ));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), expected.len(), "{stdout}");
    for (line, want) in lines.iter().zip(&expected) {
        let keys = want.at("sequences").arr();
        assert!(
            line.starts_with(&format!(
                "{} sequences, {} samples, first key {},",
                keys.len(),
                want.at("samples").at("features").int(),
                keys[0].int()
            )),
            "{line} vs {want:?}"
        );
        assert_eq!(
            line.ends_with(" (sweep end)"),
            want.at("sweep_end") == &Json::Bool(true),
            "{line}"
        );
    }
}

#[test]
fn dlpack_structs_have_the_layout_of_dlpack_h() {
    if !Path::new("/usr/include/dlpack/dlpack.h").exists() {
        println!("note: dlpack/dlpack.h not found (Debian: libdlpack-dev): layout check skipped");
        return;
    }
    if !have("cc") {
        println!("note: cc not found: DLPack layout check skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("dlpack_layout");
    compile_c(&Path::new(ROOT).join("tests/c_api/dlpack_layout.c"), &exe);
    let stdout = if have("valgrind") {
        memcheck(&exe, &[ROOT])
    } else {
        run_ok(&exe, &[ROOT])
    };
    assert!(stdout.contains("layout: same"), "{stdout}");
}
