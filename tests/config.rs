//! Integration tests of the configuration module: the BrainScript language as it appears in
//! CNTK configuration files, reader-section selection and extraction in both reader forms,
//! every error and warning, and the Rust builder.

use std::path::Path;

use ctf_reader::config::brainscript::{parse, Evaluator, Value};
use ctf_reader::config::{ConfigDocument, ConfigError, ConfigWarning, DEFAULT_CHUNK_SIZE_IN_BYTES};
use ctf_reader::{InputConfig, Precision, ReaderConfig, ReaderForm, StorageFormat};

const SOURCE: &str = "test.cntk";

fn read_section(text: &str, section: Option<&str>) -> (ReaderConfig, Vec<ConfigWarning>) {
    match ReaderConfig::from_brainscript(text, SOURCE, section) {
        Ok(result) => result,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn read(text: &str) -> ReaderConfig {
    let (config, warnings) = read_section(text, None);
    assert!(warnings.is_empty(), "unexpected warnings: {warnings:?}");
    config
}

fn error_in(text: &str, section: Option<&str>) -> ConfigError {
    match ReaderConfig::from_brainscript(text, SOURCE, section) {
        Ok((config, _)) => panic!("expected an error, got {config:?}"),
        Err(e) => e,
    }
}

/// Asserts the error's position and that its message contains every fragment.
fn assert_error(text: &str, line: u32, col: u32, fragments: &[&str]) {
    let e = error_in(text, None);
    assert_eq!((e.line(), e.col()), (line, col), "position of: {e}");
    for fragment in fragments {
        assert!(e.message().contains(fragment), "'{fragment}' not in: {e}");
    }
    assert_eq!(
        e.to_string(),
        format!("{SOURCE}:{line}:{col}: error: {}", e.message())
    );
}

/// A legacy reader section around the given input and extra parameter lines.
fn legacy(params: &str, inputs: &str) -> String {
    format!(
        "reader = [\n    readerType = \"CNTKTextFormatReader\"\n    file = \"data.ctf\"\n{params}\n    input = [\n{inputs}\n    ]\n]\n"
    )
}

const ONE_INPUT: &str = "        x = [ dim = 3; format = \"dense\" ]";

// ---------------------------------------------------------------------------------------
// Seed 001: both reader forms, verbatim.
// ---------------------------------------------------------------------------------------

const SEED_SIMPLE: &str = r#"reader = [
    readerType = "CNTKTextFormatReader"
    file = "c:\mydata\SampleInput.txt" # See the second example for Linux path example

    # IMPORTANT!
    # All inputs are grouped within "input" sub-section.
    input = [
        A = [
            dim = 5
            format = "dense"
        ]
        B = [
            dim = 1000000
            format = "sparse"
        ]
        C = [
            dim = 1
            format = "dense"
        ]
    ]
]
# the rest of the cntk config ...
"#;

const SEED_EXTENDED: &str = r#"precision="double"

reader = [
    readerType = "CNTKTextFormatReader"
    file = "/home/mydata/SampleInput.txt" # See the first example for Windows style path example
    randomize = true
    randomizationWindow = 30
    skipSequenceIds = false
    maxErrors = 100
    traceLevel = 2

    chunkSizeInBytes = 1024

    keepDataInMemory = true
    frameMode = false

    input = [
        Some_very_long_input_name = [
            alias = "a"
            dim = 3
            format = "dense"
        ]
        Some_other_also_very_long_input_name = [
            alias = "b"
            dim = 2
            format = "dense"
        ]
    ]
]
# the rest of the cntk config ...
"#;

const SEED_COMPOSITE: &str = r#"reader = {
        verbosity = 0 ;
        randomize = true;
        randomizationWindow=30
        deserializers = ({
            type = "CNTKTextFormatDeserializer" ; module = "CNTKTextFormatReader"
            file = "/home/mydata/SampleInput.txt" # See the first example for Windows style path example
            maxErrors = 100
            skipSequenceIds = false
            traceLevel = 2
            input = {
                qu1fea = {alias = "qui"; dim = 95589; format = "sparse"}
                qu2fea = {alias = "quj"; dim = 95589; format = "sparse"}
                pairweight = {alias = "wij"; dim = 1; format = "dense"}
            }
        })
    }
"#;

#[test]
fn seed_simple_legacy_example() {
    let c = read(SEED_SIMPLE);
    assert_eq!(c.form, ReaderForm::Legacy);
    assert_eq!(c.files, [r"c:\mydata\SampleInput.txt"]);
    assert_eq!(
        c.inputs,
        [
            InputConfig::dense("A", 5),
            InputConfig::sparse("B", 1_000_000),
            InputConfig::dense("C", 1)
        ]
    );
    // Everything else keeps the defaults of seed 001.
    let defaults = ReaderConfig::builder()
        .file(r"c:\mydata\SampleInput.txt")
        .inputs(c.inputs.clone())
        .build()
        .unwrap();
    assert_eq!(c, defaults);
}

#[test]
fn seed_extended_legacy_example() {
    let c = read(SEED_EXTENDED);
    assert_eq!(c.files, ["/home/mydata/SampleInput.txt"]);
    assert_eq!(
        c.precision,
        Precision::Double,
        "inherited from the top level"
    );
    assert!(c.randomize);
    assert_eq!(c.randomization_window, Some(30));
    assert!(!c.skip_sequence_ids);
    assert_eq!(c.max_errors, 100);
    assert_eq!(c.trace_level, 2);
    assert_eq!(c.chunk_size_in_bytes, 1024);
    assert!(c.keep_data_in_memory);
    assert!(!c.frame_mode);
    assert_eq!(
        c.inputs,
        [
            InputConfig::dense("Some_very_long_input_name", 3).with_alias("a"),
            InputConfig::dense("Some_other_also_very_long_input_name", 2).with_alias("b"),
        ]
    );
}

#[test]
fn seed_composite_example() {
    let c = read(SEED_COMPOSITE);
    assert_eq!(c.form, ReaderForm::Composite);
    assert_eq!(c.files, ["/home/mydata/SampleInput.txt"]);
    assert_eq!(c.verbosity, 0);
    assert!(c.randomize);
    assert_eq!(
        c.randomization_window,
        Some(30),
        "reader-level key reaches the deserializer"
    );
    assert_eq!(c.max_errors, 100);
    assert_eq!(c.trace_level, 2);
    // Configuration order, not alphabetical order.
    assert_eq!(
        c.inputs,
        [
            InputConfig::sparse("qu1fea", 95589).with_alias("qui"),
            InputConfig::sparse("qu2fea", 95589).with_alias("quj"),
            InputConfig::dense("pairweight", 1).with_alias("wij"),
        ]
    );
}

#[test]
fn builder_and_brainscript_agree() {
    let built = ReaderConfig::builder()
        .file("/home/mydata/SampleInput.txt")
        .input(InputConfig::sparse("qu1fea", 95589).with_alias("qui"))
        .input(InputConfig::sparse("qu2fea", 95589).with_alias("quj"))
        .input(InputConfig::dense("pairweight", 1).with_alias("wij"))
        .randomization_window(30)
        .max_errors(100)
        .trace_level(2)
        .verbosity(0)
        .form(ReaderForm::Composite)
        .build()
        .unwrap();
    assert_eq!(read(SEED_COMPOSITE), built);
}

// ---------------------------------------------------------------------------------------
// Seed 002: every construct that can appear in a configuration file.
// ---------------------------------------------------------------------------------------

const SEED_002_CONSTRUCTS: &str = r#"
numbers = 13 : 42 : 3.1415926538 : 1e30
bools = true : false
names = "my_model.dnn" : 'single quotes'
quote = "He'd say " + '"Yes!" in a jiffy.'
I3 = Parameter (3, 3, init='fromLiteral', initFromLiteral = '1 0 0
0 1 0
0 0 1')
arith = a + b - c * d / e .* f
a = 1; b = 2; c = 3; d = 4; e = 8; f = 2
logic = (1 < 2) && (2 <= 2) || !(3 > 4) && (4 >= 4) && (1 == 1) && (1 != 2)
neg = -a
cond = if a == 1 then "one" else "other"
DNNLayerStack (x, numLayers) =
    if numLayers == 1
    then DNNLayer (x, hiddenDim, featDim)
    else DNNLayer (DNNLayerStack (x, numLayers-1), # add a layer to a stack of numLayers-1
                   hiddenDim, hiddenDim)
h = DenseLayer {1024} (v)
rec = {
    x = 13
    y = x * factorParameter
    f (z) = y + z
}
factorParameter = 2
rx = rec.x
ry = rec.y
imageDims = (256 : 256 : 3)
inputFilter = ParameterTensor {imageDims}
third = imageDims[2]
arr[i:i0..i1] = f(i)
stack1 = [
    layers[l:1..L] =
        if l == 1
        then DNNLayer (x, hiddenDim, featDim)
        else DNNLayer (layers[l-1], hiddenDim, hiddenDim)
]
stack2 = [
    layers = array[1..L] (l =>
        if l == 1
        then DNNLayer (x, hiddenDim, featDim)
        else DNNLayer (layers[l-1], hiddenDim, hiddenDim)
    )
]
Layer1 (x, m, n, f) = f (ParameterTensor {(m:n)} * x + ParameterTensor {n})
h1 = Layer1 (x, 512, 40, Sigmoid)
h2 = Layer1 (x, 512, 40, (x => Log (Constant(1) + Exp (x))))
Layer {m, n, f} = {
    W = ParameterTensor {(m:n)} # parameter creation
    b = ParameterTensor {n}
    apply (x) = f (W * x + b) # the function to apply to data
}.apply
h3 = Layer {512, 40, Sigmoid} (x)
BrainScriptNetworkBuilder = (new ComputationNetwork { featureNodes = (features) })
Tanh (z, tag='') = new ComputationNode { operation = 'Tanh' ; inputs = z /* plus the function args */ }
Layers = {
    Affine (x, m, n) = ParameterTensor {(m:n)} * x + ParameterTensor {n}
    Sigmoid (x, m, n) = Sigmoid (Affine (x, m, n))
    ReLU (x, m, n) = RectifiedLinear (Affine (x, m, n))
}
# 1-hidden layer MLP
ce = CrossEntropyWithSoftmax (Layers.Affine (Layers.Sigmoid (feat, 512, 40), 9000, 512))
squared = { x = 13 ; y = x * x }.y
SigmoidLayer (m, n, x) = {
    W = Parameter (m, n, init='uniform')
    b = Parameter (m, 1, init='value', initValue=0)
    h = Sigmoid (W * x + b)
}.h
fsharp = [| 1; 2; 3 |]
records = ({ k = 1 } : { k = 2 })
reader = [
    readerType = "CNTKTextFormatReader"
    file = names[0] + ".ctf"
    input = [ x = [ dim = third * rx; format = "dense" ] ]
]
"#;

fn eval_member(text: &str, name: &str) -> String {
    let doc = parse(text).unwrap();
    let mut eval = Evaluator::new(&doc);
    let root = eval.root();
    match eval.get(&root, name) {
        Ok(Some(Value::Number(n))) => format!("{n}"),
        Ok(Some(Value::Str(s))) => s,
        Ok(Some(Value::Bool(b))) => format!("{b}"),
        Ok(Some(Value::Array(items))) => format!("array of {}", items.len()),
        Ok(Some(Value::Record(r))) => format!("record at {}", r.pos()),
        Ok(None) => "missing".to_string(),
        Err(e) => format!("error {e}"),
    }
}

#[test]
fn seed_002_constructs_parse_and_evaluate() {
    let t = SEED_002_CONSTRUCTS;
    assert_eq!(eval_member(t, "numbers"), "array of 4");
    assert_eq!(eval_member(t, "bools"), "array of 2");
    assert_eq!(eval_member(t, "quote"), "He'd say \"Yes!\" in a jiffy.");
    assert_eq!(eval_member(t, "arith"), "0"); // 1 + 2 - 3*4/8*2
    assert_eq!(eval_member(t, "logic"), "true");
    assert_eq!(eval_member(t, "neg"), "-1");
    assert_eq!(eval_member(t, "cond"), "one");
    assert_eq!(eval_member(t, "rx"), "13");
    assert_eq!(eval_member(t, "ry"), "26"); // factorParameter from the enclosing record
    assert_eq!(eval_member(t, "third"), "3");
    assert_eq!(eval_member(t, "squared"), "169");
    assert_eq!(eval_member(t, "fsharp"), "array of 3");
    assert_eq!(eval_member(t, "records"), "array of 2");
    // The string literal spans lines and keeps them.
    let doc = parse(t).unwrap();
    let i3 = doc.members.iter().find(|m| m.name == "I3").unwrap();
    let printed = format!("{:?}", i3.value);
    assert!(printed.contains("1 0 0\\n0 1 0\\n0 0 1"), "{printed}");
    // The reader section evaluates in the middle of all of this.
    let c = read(t);
    assert_eq!(c.files, ["my_model.dnn.ctf"]);
    assert_eq!(c.inputs, [InputConfig::dense("x", 39)]);
}

#[test]
fn network_constructs_are_errors_only_when_evaluated() {
    let t = SEED_002_CONSTRUCTS;
    for (name, fragment) in [
        ("I3", "function 'Parameter'"),
        ("h", "function call"),
        ("DNNLayerStack", "lambda"),
        ("arr", "'array[..]'"),
        ("BrainScriptNetworkBuilder", "'new ComputationNetwork'"),
        ("ce", "function 'CrossEntropyWithSoftmax'"),
    ] {
        let result = eval_member(t, name);
        assert!(
            result.starts_with("error ") && result.contains(fragment),
            "{name}: {result}"
        );
    }
}

#[test]
fn legacy_config_syntax_parses() {
    let text = r#"
# A legacy CNTK configuration
RootDir = ".."
ConfigDir = "$RootDir$/Config"
command = train:test
deviceId = $DeviceId$
precision = float
stderr = "$OutputDir$/log"
ndlMacros = $ConfigDir$/Macros.ndl
traceLevel = 1
train = [
    action = train
    modelPath = "$ModelDir$/model.dnn"
    SGD = [ learningRatesPerMB = 0.1*5:0.3; momentumPerMB = 0.9; maxEpochs = 10, minibatchSize = 128:256 ]
    reader = [
        readerType = CNTKTextFormatReader
        file = "data/train.txt"
        randomize = none
        input = [ features = [ dim = 784; format = dense ]; labels = [ dim = 10; format = sparse ] ]
    ]
]
"#;
    let (c, warnings) = read_section(text, Some("train"));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(c.precision, Precision::Float);
    assert!(!c.randomize, "randomize = none means no randomization");
    assert_eq!(c.trace_level, 1, "traceLevel from the top level");
    assert_eq!(
        c.inputs,
        [
            InputConfig::dense("features", 784),
            InputConfig::sparse("labels", 10)
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Lazy evaluation.
// ---------------------------------------------------------------------------------------

#[test]
fn unsupported_constructs_in_unused_members_are_fine() {
    let text = format!(
        "{}\nmacro = $DeviceId$\ncall = Unknown(1, 2)\nlambda = (x => x * 2)\nnet = new ComputationNetwork {{ a = b }}\ncycle1 = cycle2\ncycle2 = cycle1\nbad = 'a' + 1\nundefined = nothing + 1\n",
        legacy("", ONE_INPUT)
    );
    let c = read(&text);
    assert_eq!(c.inputs, [InputConfig::dense("x", 3)]);
}

#[test]
fn unsupported_constructs_in_used_members_are_errors() {
    // The macro is reported where it is written, with the parameter that needed it.
    let text = "reader = [\n  file = \"a\"\n  input = [ x = [ dim = d; format = \"dense\" ] ]\n]\nd = $Dim$\n";
    assert_error(
        text,
        5,
        5,
        &[
            "parameter 'dim' of input 'x' (at 3:25)",
            "macro '$Dim$' is not supported",
        ],
    );
    let text =
        "reader = [\n  file = \"a\"\n  input = [ x = [ dim = Dim(3); format = \"dense\" ] ]\n]\n";
    assert_error(
        text,
        3,
        28,
        &["parameter 'dim' of input 'x'", "a call of function 'Dim'"],
    );
    let text =
        "reader = [\n  file = (x => x)\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]\n";
    assert_error(text, 2, 11, &["parameter 'file'", "lambda"]);
    let text = "reader = [\n  file = \"a\"\n  chunkSizeInBytes = new Size { }\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]\n";
    assert_error(text, 3, 22, &["parameter 'chunkSizeInBytes'", "'new Size'"]);
    let text = "reader = [\n  file = \"a\"\n  maxErrors = m\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]\nm = n + 1\nn = m\n";
    assert_error(
        text,
        6,
        1,
        &[
            "parameter 'maxErrors' (at 3:15)",
            "cycle: m (6:1) -> n (7:1) -> m (6:1)",
        ],
    );
    let text =
        "reader = [\n  file = $DataDir$\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]\n";
    assert_error(text, 2, 10, &["macro '$DataDir$'", "--file"]);
}

#[test]
fn macros_inside_string_values_are_errors() {
    let text = "reader = [\n  file = \"$DataDir$/train.txt\"\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]\n";
    assert_error(
        text,
        2,
        10,
        &["parameter 'file' uses the macro '$DataDir$'", "pass --file"],
    );
    let text = "reader = [\n  file = \"a\"\n  input = [ x = [ dim = 1; format = \"$Fmt$\" ] ]\n]\n";
    assert_error(
        text,
        3,
        37,
        &["parameter 'format' of input 'x' uses the macro '$Fmt$'"],
    );
    // A quoted macro where a number or a boolean is expected (CNTK substitutes it, then
    // strips the quotes) is reported as the macro, not as a string of the wrong type.
    let text = "reader = [\n  file = \"a\"\n  input = [ x = [ dim = \"$Dim$\"; format = \"dense\" ] ]\n]\n";
    assert_error(
        text,
        3,
        25,
        &[
            "parameter 'dim' of input 'x' uses the macro '$Dim$', which is not supported",
            "pass --input",
        ],
    );
    let text = "reader = [\n  file = \"a\"\n  randomize = \"$Shuffle$\"\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]\n";
    assert_error(
        text,
        3,
        15,
        &["parameter 'randomize' uses the macro '$Shuffle$', which is not supported"],
    );
}

/// `--file` replaces the first deserializer's files only, and `--input` the inputs of a
/// reader with one deserializer only: a macro's error suggests an option only where it would
/// stand in for the macro, quoted or not.
#[test]
fn macro_errors_suggest_only_the_options_that_replace_the_parameter() {
    let deserializer = |file: &str, dim: &str| {
        format!(
            "{{ type = \"CNTKTextFormatDeserializer\"; module = \"CNTKTextFormatReader\"\n    \
             file = {file}\n    input = {{ x = {{ dim = {dim}; format = \"dense\" }} }} }}"
        )
    };
    let composite = |parts: &[String]| {
        format!(
            "reader = {{\n  deserializers = ({})\n}}\n",
            parts.join(" : ")
        )
    };
    let plain = deserializer("\"a.ctf\"", "1");
    // (configuration, line, column of the macro, suggestion expected)
    let cases = [
        (
            composite(&[deserializer("\"$D$\"", "1"), plain.clone()]),
            3,
            12,
            Some("--file"),
        ),
        (
            composite(&[deserializer("$D$", "1"), plain.clone()]),
            3,
            12,
            Some("--file"),
        ),
        (
            composite(&[plain.clone(), deserializer("\"$D$\"", "1")]),
            5,
            12,
            None,
        ),
        (
            composite(&[plain.clone(), deserializer("$D$", "1")]),
            5,
            12,
            None,
        ),
        (
            composite(&[deserializer("\"a\"", "\"$N$\""), plain.clone()]),
            4,
            27,
            None,
        ),
        (
            composite(&[deserializer("\"a\"", "$N$"), plain.clone()]),
            4,
            27,
            None,
        ),
        (
            composite(&[deserializer("\"a\"", "\"$N$\"")]),
            4,
            27,
            Some("--input"),
        ),
        (
            composite(&[deserializer("\"a\"", "$N$")]),
            4,
            27,
            Some("--input"),
        ),
        (
            "reader = [\n  file = \"a\"\n  input = [ x = [ dim = $N$; format = \"dense\" ] ]\n]\n"
                .to_string(),
            3,
            25,
            Some("--input"),
        ),
    ];
    // A `file` in the reader record is read by every deserializer: `--file` replaces it
    // only for the first, so it stands in only when there is no other.
    let shared_file = |parts: &[&str]| {
        let parts: Vec<String> = parts
            .iter()
            .map(|input| {
                format!(
                    "{{ type = \"CNTKTextFormatDeserializer\"\n    input = {{ {input} = {{ dim = 1; format = \"dense\" }} }} }}"
                )
            })
            .collect();
        format!(
            "reader = {{\n  file = \"$F$\"\n  deserializers = ({})\n}}\n",
            parts.join(" : ")
        )
    };
    // The first deserializer inherits it and the second has its own: `--file` replaces it.
    let own_second = shared_file(&["x", "y"]).replacen(
        "{ type = \"CNTKTextFormatDeserializer\"\n    input = { y",
        "{ type = \"CNTKTextFormatDeserializer\"; file = \"b\"\n    input = { y",
        1,
    );
    assert!(own_second.contains("file = \"b\""));
    // Both name one member that holds the macro: `--file` leaves the second's.
    let named = composite(&[deserializer("D", "1"), deserializer("D", "1")]) + "D = $D$\n";
    let cases = cases.into_iter().chain([
        (shared_file(&["x", "y"]), 2, 10, None),
        (shared_file(&["x"]), 2, 10, Some("--file")),
        (own_second, 2, 10, Some("--file")),
        (named, 8, 5, None),
    ]);
    for (text, line, col, option) in cases {
        let e = error_in(&text, None);
        assert_eq!((e.line(), e.col()), (line, col), "position of: {e}\n{text}");
        assert!(e.message().contains("macro '$"), "{e}");
        match option {
            Some(option) => assert!(
                e.message().contains(&format!("pass {option}")),
                "{e}\n{text}"
            ),
            None => assert!(!e.message().contains("pass --"), "{e}\n{text}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Lookup rules: inheritance, case, `default`, expressions, unquoted words.
// ---------------------------------------------------------------------------------------

#[test]
fn keys_are_inherited_from_enclosing_records() {
    let text = format!(
        "precision = \"double\"\ntraceLevel = 0\ntrain = [\n  maxErrors = 5\n  {}\n]\n",
        legacy("    traceLevel = 2", ONE_INPUT).replace('\n', "\n  ")
    );
    let c = read(&text);
    assert_eq!(c.precision, Precision::Double);
    assert_eq!(c.max_errors, 5);
    assert_eq!(c.trace_level, 2, "the nearest definition wins");
}

#[test]
fn composite_reader_keys_reach_the_deserializer() {
    let text = r#"
precision = "double"
reader = {
    randomize = false
    maxErrors = 7
    keepDataInMemory = true
    file = "outer.ctf"
    deserializers = ({
        type = "CNTKTextFormatDeserializer"
        traceLevel = 2
        input = { x = { dim = 2; format = "dense" } }
    })
}
"#;
    let c = read(text);
    assert_eq!(c.form, ReaderForm::Composite);
    assert_eq!(c.precision, Precision::Double);
    assert!(!c.randomize);
    assert_eq!(c.max_errors, 7);
    assert!(c.keep_data_in_memory);
    assert_eq!(c.files, ["outer.ctf"]);
    assert_eq!(c.trace_level, 2, "a reader-level key in the deserializer");
}

#[test]
fn keys_are_case_insensitive() {
    let text = r#"
READER = [
    READERTYPE = "cntktextformatreader"
    FILE = "a.ctf"
    Precision = "Double"
    RANDOMIZE = FALSE_VALUE
    MaxErrors = 2
    Input = [ Feat = [ DIM = 4; FORMAT = "DENSE"; Alias = "f"; DefinesMbSize = true ] ]
]
false_value = false
"#;
    let c = read(text);
    assert_eq!(c.precision, Precision::Double);
    assert!(!c.randomize);
    assert_eq!(c.max_errors, 2);
    assert_eq!(
        c.inputs,
        [InputConfig::dense("Feat", 4)
            .with_alias("f")
            .defining_mb_size()]
    );
}

/// A name in an expression resolves to the nearest member spelled exactly so, through every
/// enclosing record, before any member of another case (BrainScript names are
/// case-sensitive, as CNTK's `ConfigRecord`): `file = File` is not a cycle, and `dim = Dim`
/// does not take the sibling `dim`. The audit's repro/case1..3.cntk.
#[test]
fn references_resolve_to_the_exact_spelling_first() {
    let text = r#"
File = "h.ctf"
Dim = 2
Format = "sparse"
reader = [
  readerType = "CNTKTextFormatReader"
  file = File
  input = [
    a = [ dim = Dim ; format = "dense" ]
    b = [ dim = 4 ; format = Format ]
  ]
]
"#;
    let c = read(text);
    assert_eq!(c.files, ["h.ctf"]);
    assert_eq!(
        c.inputs,
        [InputConfig::dense("a", 2), InputConfig::sparse("b", 4)]
    );
    // A sibling spelled otherwise is not taken for the outer name.
    let text = r#"
Format = 3
reader = [
  readerType = "CNTKTextFormatReader"
  file = "h.ctf"
  input = [ a = [ format = "dense" ; dim = Format ] ]
]
"#;
    assert_eq!(read(text).inputs, [InputConfig::dense("a", 3)]);
}

#[test]
fn default_means_the_default() {
    let text = format!(
        "traceLevel = 2\nprecision = \"double\"\n{}",
        legacy(
            "    traceLevel = \"default\"\n    precision = default\n    randomize = 'Default'\n    chunkSizeInBytes = \"DEFAULT\"",
            "        x = [ dim = 3; format = \"dense\"; alias = \"default\" ]"
        )
    );
    let c = read(&text);
    assert_eq!(c.trace_level, 1);
    assert_eq!(c.precision, Precision::Float);
    assert!(c.randomize);
    assert_eq!(c.chunk_size_in_bytes, DEFAULT_CHUNK_SIZE_IN_BYTES);
    assert_eq!(c.inputs[0].alias, "x");
}

#[test]
fn values_are_expressions() {
    let text = r#"
reader = [
    file = dir + "/x.txt"
    randomizationWindow = 2 * windowChunks
    randomize = windowChunks > 1 && !noShuffle
    input = [
        image = [ dim = 28*28; format = "dense" ]
        label = [ dim = classes; format = if classes > 100 then "sparse" else "dense" ]
    ]
]
dir = root + "/data"
root = "/home/me"
windowChunks = 4
noShuffle = false
classes = 10
"#;
    let c = read(text);
    assert_eq!(c.files, ["/home/me/data/x.txt"]);
    assert_eq!(c.randomization_window, Some(8));
    assert!(c.randomize);
    assert_eq!(
        c.inputs,
        [
            InputConfig::dense("image", 784),
            InputConfig::dense("label", 10)
        ]
    );
}

#[test]
fn several_files() {
    let text = legacy("", ONE_INPUT).replace(
        "file = \"data.ctf\"",
        "file = \"a.ctf\" : \"b.ctf\" : dir + \"c.ctf\"",
    );
    let c = read(&format!("{text}dir = \"d/\"\n"));
    assert_eq!(c.files, ["a.ctf", "b.ctf", "d/c.ctf"]);
}

#[test]
fn unquoted_words_are_strings_unless_defined() {
    let text = "reader = [\n  readerType = CNTKTextFormatReader\n  file = data\n  precision = double\n  input = [ x = [ dim = 1; format = dense ]; y = [ dim = 2; format = sparse; alias = why ] ]\n]\nsparse = \"dense\"\n";
    let c = read(text);
    assert_eq!(c.files, ["data"]);
    assert_eq!(c.precision, Precision::Double);
    // `sparse` is a member of the document, so it is a reference, not a word.
    assert_eq!(
        c.inputs,
        [
            InputConfig::dense("x", 1),
            InputConfig::dense("y", 2).with_alias("why")
        ]
    );
}

#[test]
fn all_scalar_parameters() {
    let c = read(&legacy(
        "    precision = \"double\"\n    randomize = false\n    randomizationSeed = 42\n    randomizationWindow = 1000\n    sampleBasedRandomizationWindow = true\n    skipSequenceIds = true\n    maxErrors = 3\n    traceLevel = 0\n    chunkSizeInBytes = 0\n    keepDataInMemory = true\n    frameMode = true\n    cacheIndex = true\n    verbosity = 2",
        ONE_INPUT,
    ));
    let expected = ReaderConfig::builder()
        .file("data.ctf")
        .input(InputConfig::dense("x", 3))
        .precision(Precision::Double)
        .randomize(false)
        .randomization_seed(42)
        .randomization_window(1000)
        .sample_based_randomization_window(true)
        .skip_sequence_ids(true)
        .max_errors(3)
        .trace_level(0)
        .chunk_size_in_bytes(0)
        .keep_data_in_memory(true)
        .frame_mode(true)
        .cache_index(true)
        .verbosity(2)
        .build()
        .unwrap();
    assert_eq!(c, expected);
    let c = read(&legacy(
        "    randomize = \"auto\"\n    randomizationWindow = auto",
        ONE_INPUT,
    ));
    assert!(c.randomize);
    assert_eq!(c.randomization_window, None);
}

#[test]
fn quoted_integers_are_integers() {
    // CNTK runs a configuration with `command` through its legacy parser, which keeps every
    // value as text without its quotes, so a quoted integer is that integer there.
    let c = read(&legacy(
        "    randomizationSeed = \"7\"\n    randomizationWindow = \"50\"\n    maxErrors = \"12\"\n    traceLevel = \"0\"\n    chunkSizeInBytes = \"4096\"\n    verbosity = \"2\"\n    numDataPartitions = \"4\"\n    partitionIndex = \"3\"",
        "        x = [ dim = \"784\"; format = \"dense\" ]\n        y = [ dim = '10'; format = \"sparse\" ]",
    ));
    let expected = ReaderConfig::builder()
        .file("data.ctf")
        .input(InputConfig::dense("x", 784))
        .input(InputConfig::sparse("y", 10))
        .randomization_seed(7)
        .randomization_window(50)
        .max_errors(12)
        .trace_level(0)
        .chunk_size_in_bytes(4096)
        .verbosity(2)
        .partition(3, 4)
        .build()
        .unwrap();
    assert_eq!(c, expected);
}

#[test]
fn legacy_booleans() {
    // CNTK's legacy parser reads a boolean from the text `1`, `0`, `t` or `f` too.
    let c = read(&legacy(
        "    randomize = 0\n    skipSequenceIds = 1\n    keepDataInMemory = \"1\"\n    frameMode = T\n    cacheIndex = 't'\n    sampleBasedRandomizationWindow = \"0\"",
        "        x = [ dim = 3; format = \"dense\"; definesMBSize = 1 ]\n        y = [ dim = 2; format = \"sparse\"; definesMBSize = F ]",
    ));
    let expected = ReaderConfig::builder()
        .file("data.ctf")
        .input(InputConfig::dense("x", 3).defining_mb_size())
        .input(InputConfig::sparse("y", 2))
        .randomize(false)
        .skip_sequence_ids(true)
        .keep_data_in_memory(true)
        .frame_mode(true)
        .cache_index(true)
        .sample_based_randomization_window(false)
        .build()
        .unwrap();
    assert_eq!(c, expected);
    let c = read(&legacy(
        "    randomize = 1\n    frameMode = \"f\"",
        ONE_INPUT,
    ));
    assert!(c.randomize);
    assert!(!c.frame_mode);
}

#[test]
fn inputs_keep_configuration_order_and_flags() {
    let c = read(&legacy(
        "",
        "        zeta = [ dim = 1; format = \"dense\" ]\n        alpha = [ dim = 2; format = \"sparse\"; definesMBSize = true ]\n        Mid = [ dim = 3; format = \"Dense\"; alias = \"m\" ]",
    ));
    let names: Vec<&str> = c.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["zeta", "alpha", "Mid"]);
    assert_eq!(c.mb_size_input(), Some(1));
    assert_eq!(c.inputs[1].format, StorageFormat::Sparse);
}

// ---------------------------------------------------------------------------------------
// Section selection (SPEC §7.5).
// ---------------------------------------------------------------------------------------

fn section_doc(top: &str) -> String {
    format!(
        "{top}\ntrain = [\n  action = \"train\"\n  reader = [ file = \"train.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]\n]\ntest = [\n  reader = [ file = \"test.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]\n]\n"
    )
}

fn file_of(text: &str, section: Option<&str>) -> String {
    let (c, _) = read_section(text, section);
    c.files.join(",")
}

#[test]
fn top_level_reader_wins() {
    let text = section_doc("command = test\nreader = [ file = \"top.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]");
    assert_eq!(file_of(&text, None), "top.ctf");
}

#[test]
fn command_selects_the_section() {
    assert_eq!(file_of(&section_doc("command = train"), None), "train.ctf");
    assert_eq!(
        file_of(&section_doc("command = \"test\""), None),
        "test.ctf"
    );
    assert_eq!(
        file_of(&section_doc("Command = write:test"), None),
        "test.ctf"
    );
    for command in ["command = train:test", "command = \"train:test\""] {
        let e = error_in(&section_doc(command), None);
        assert!(
            e.message()
                .contains("several reader sections found: train.reader (4:3), test.reader (7:3)"),
            "{e}"
        );
        assert_eq!(e.to_string(), format!("{SOURCE}: error: {}", e.message()));
    }
    // A section named twice (in any case) names one reader: it is used (audit B5).
    for command in ["command = test:test", "command = \"test:Test\""] {
        assert_eq!(
            file_of(&section_doc(command), None),
            "test.ctf",
            "{command}"
        );
    }
    let e = error_in(&section_doc("command = train:test:train"), None);
    assert!(
        e.message()
            .contains("several reader sections found: train.reader (4:3), test.reader (7:3);"),
        "{e}"
    );
}

#[test]
fn the_only_reader_anywhere() {
    let text = "a = [ b = [ c = 1\n reader = [ file = \"deep.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ] ] ]\nother = [ cvReader = [ ] ]";
    assert_eq!(file_of(text, None), "deep.ctf");
    // A command naming a section without a reader falls back to the search.
    assert_eq!(
        file_of(&format!("command = other\n{text}"), None),
        "deep.ctf"
    );
}

#[test]
fn several_or_no_readers() {
    let e = error_in(&section_doc(""), None);
    assert!(
        e.message()
            .contains("train.reader (4:3), test.reader (7:3)"),
        "{e}"
    );
    assert!(e.message().contains("--section"), "{e}");
    let e = error_in("a = 1\nb = [ c = 2 ]\n", None);
    assert!(e.message().contains("no reader section found"), "{e}");
}

#[test]
fn explicit_sections() {
    let text = section_doc("command = train:test");
    assert_eq!(file_of(&text, Some("train")), "train.ctf");
    assert_eq!(file_of(&text, Some("TEST")), "test.ctf");
    assert_eq!(file_of(&text, Some("train.reader")), "train.ctf");
    assert_eq!(file_of(&text, Some("Test.Reader")), "test.ctf");
    let deep = "a = [ b = [ reader = [ file = \"ab.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ] ] ]";
    assert_eq!(file_of(deep, Some("a.b.reader")), "ab.ctf");
    assert_eq!(file_of(deep, Some("a.b")), "ab.ctf");
    let direct = "cv = [ file = \"cv.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]";
    assert_eq!(file_of(direct, Some("cv")), "cv.ctf");

    let e = error_in(&text, Some("validate"));
    assert!(e.message().contains("section 'validate' not found"), "{e}");
    let e = error_in(&text, Some("train.reader.input.x.y"));
    assert!(
        e.message().contains("there is no 'train.reader.input.x.y'"),
        "{e}"
    );
    let e = error_in("a = [ b = 1 ]", Some("a"));
    assert!(e.message().contains("holds no 'reader'"), "{e}");
    // A section without its own reader uses the nearest enclosing one, as CNTK's actions
    // find theirs (its configuration lookup goes on through the enclosing sections).
    let shared = "reader = [ file = \"shared.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]\ncommand = train:test\ntrain = [\n  action = \"train\"\n  SGD = [ maxEpochs = 1 ]\n]\ntest = [\n  reader = [ file = \"test.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]\n]\n";
    assert_eq!(file_of(shared, Some("train")), "shared.ctf");
    assert_eq!(file_of(shared, Some("train.SGD")), "shared.ctf");
    assert_eq!(file_of(shared, Some("test")), "test.ctf");
    let nested = "a = [ reader = [ file = \"a.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]; b = [ c = [ d = 1 ] ] ]";
    assert_eq!(file_of(nested, Some("a.b.c")), "a.ctf");
    // Enclosing along the path given, not where a record was written: `x` is a top-level
    // section (so the top-level reader), `train.t` one of `train` (so train's reader).
    let aliased = "reader = [ file = \"top.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]\ntrain = [\n  reader = [ file = \"train.ctf\"; input = [ x = [ dim = 1; format = \"dense\" ] ] ]\n  sub = [ a = 1 ]\n  t = base.t\n]\nbase = [ t = [ a = 1 ] ]\nx = train.sub\n";
    assert_eq!(file_of(aliased, Some("x")), "top.ctf");
    assert_eq!(file_of(aliased, Some("train.sub")), "train.ctf");
    assert_eq!(file_of(aliased, Some("train.t")), "train.ctf");
    assert_eq!(file_of(aliased, Some("base.t")), "top.ctf");
    // A record inside a reader section is no action's section, nor a reader, even when a
    // member of it is called `reader`.
    let input_named_reader = aliased.replacen("input = [ x = [", "input = [ reader = [", 1);
    let renamed = aliased.replacen(
        "reader = [ file",
        "R1 = [ readerType = \"CNTKTextFormatReader\"; file",
        1,
    );
    for (text, inside, reader) in [
        (aliased, "reader.input", "reader"),
        (aliased, "reader.input.x", "reader"),
        (aliased, "train.reader.input", "train.reader"),
        (input_named_reader.as_str(), "reader.input", "reader"),
        (input_named_reader.as_str(), "reader.input.reader", "reader"),
        (&renamed, "R1.input", "R1"),
    ] {
        let e = error_in(text, Some(inside));
        assert!(
            e.message()
                .contains(&format!("is inside the reader section '{reader}'")),
            "{inside}: {e}"
        );
    }
    let e = error_in("a = [ b = 1 ]", Some("a.b"));
    assert!(
        e.message().contains("'a.b' is a number, not a record"),
        "{e}"
    );
    assert_eq!((e.line(), e.col()), (1, 11));
    let e = error_in("a = [ b = 1 ]", Some("a..b"));
    assert!(e.message().contains("invalid section path"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Errors: each names the parameter and points at it.
// ---------------------------------------------------------------------------------------

#[test]
fn missing_required_parameters() {
    assert_error(
        "reader = [\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]",
        1,
        10,
        &["missing required parameter 'file'"],
    );
    assert_error(
        "reader = [\n  file = \"a\"\n]",
        1,
        10,
        &["missing required parameter 'input'"],
    );
    assert_error(
        "reader = [\n  file = \"a\"\n  input = [ ]\n]",
        3,
        11,
        &["'input' defines no inputs"],
    );
    assert_error(
        "reader = [\n  file = \"a\"\n  input = [ x = [ format = \"dense\" ] ]\n]",
        3,
        17,
        &["input 'x' is missing required parameter 'dim'"],
    );
    assert_error(
        "reader = [\n  file = \"a\"\n  input = [ x = [ dim = 2 ] ]\n]",
        3,
        17,
        &["input 'x' is missing required parameter 'format'"],
    );
}

#[test]
fn wrong_values() {
    let cases: &[(&str, &str, u32, u32, &str)] = &[
        ("", "        x = [ dim = 0; format = \"dense\" ]", 6, 21, "parameter 'dim' of input 'x' must be a positive integer, got 0"),
        ("", "        x = [ dim = -1; format = \"dense\" ]", 6, 21, "parameter 'dim' of input 'x' must be a positive integer, got -1"),
        ("", "        x = [ dim = 2.5; format = \"dense\" ]", 6, 21, "got 2.5"),
        ("", "        x = [ dim = \"3.0\"; format = \"dense\" ]", 6, 21, "got '3.0'"),
        ("", "        x = [ dim = \" 3\"; format = \"dense\" ]", 6, 21, "got ' 3'"),
        ("", "        x = [ dim = 3; format = \"dens\" ]", 6, 33, "unknown format 'dens' for input 'x': expected 'dense' or 'sparse'"),
        ("", "        x = [ dim = 3; format = 1 ]", 6, 33, "parameter 'format' of input 'x' must be a string, got 1"),
        ("", "        x = [ dim = 2147483648; format = \"sparse\" ]", 6, 21, "sparse input 'x' must be at most 2147483647"),
        ("", "        x = [ dim = 1; format = \"dense\"; alias = \"\" ]", 6, 50, "'alias' of input 'x' must not be empty"),
        ("", "        x = [ dim = 1; format = \"dense\"; alias = \"a\" ]\n        y = [ dim = 1; format = \"dense\"; alias = \"a\" ]", 7, 50, "alias 'a' is used by both input 'x' and input 'y'"),
        ("", "        x = [ dim = 1; format = \"dense\" ]\n        X = [ dim = 1; format = \"dense\" ]", 7, 9, "input names 'x' and 'X' collide"),
        ("", "        x = [ dim = 1; format = \"dense\"; definesMBSize = true ]\n        y = [ dim = 1; format = \"dense\"; definesMBSize = true ]", 7, 58, "only one input may set 'definesMBSize', but 2 do: x, y"),
        ("", "        x = [ dim = 1; format = \"dense\"; definesMBSize = 2 ]", 6, 58, "'definesMBSize' of input 'x' must be a boolean"),
        ("", "        x = [ dim = 1; format = \"dense\"; definesMBSize = \"yes\" ]", 6, 58, "'definesMBSize' of input 'x' must be a boolean"),
        ("", "        x = 3", 6, 13, "input 'x' must be a record"),
        ("    precision = \"half\"", ONE_INPUT, 4, 17, "parameter 'precision' must be 'float' or 'double', got 'half'"),
        ("    randomize = 3", ONE_INPUT, 4, 17, "parameter 'randomize' must be a boolean (true or false), got 3"),
        ("    maxErrors = -1", ONE_INPUT, 4, 17, "parameter 'maxErrors' must be a non-negative integer, got -1"),
        ("    chunkSizeInBytes = 1.5", ONE_INPUT, 4, 24, "parameter 'chunkSizeInBytes' must be a non-negative integer, got 1.5"),
        ("    traceLevel = \"high\"", ONE_INPUT, 4, 18, "parameter 'traceLevel' must be a non-negative integer below 2^32, got 'high'"),
        ("    traceLevel = 1e10", ONE_INPUT, 4, 18, "below 2^32"),
        ("    randomizationSeed = seed", ONE_INPUT, 4, 25, "got the undefined name 'seed'"),
        ("    frameMode = \"yes\"", ONE_INPUT, 4, 17, "parameter 'frameMode' must be a boolean"),
        ("    randomize = true\n    Randomize = false", ONE_INPUT, 5, 5, "parameter 'Randomize' is given twice ('randomize' at 4:5"),
    ];
    for (params, inputs, line, col, fragment) in cases {
        assert_error(&legacy(params, inputs), *line, *col, &[fragment]);
    }
}

#[test]
fn wrong_files() {
    let with_file = |file: &str| {
        format!(
            "reader = [\n  file = {file}\n  input = [ x = [ dim = 1; format = \"dense\" ] ]\n]\n"
        )
    };
    assert_error(
        &with_file("3"),
        2,
        10,
        &["parameter 'file' must be a string or an array of strings, got 3"],
    );
    // A wrong element is pointed at, not the array (audit B6, repro/arr_elem.cntk).
    assert_error(&with_file("\"a\" : 3"), 2, 16, &["an element is a number"]);
    assert_error(
        &with_file("(\"h.ctf\" :\n          \"h.ctf\" :\n          42)"),
        4,
        11,
        &["parameter 'file' must be a string or an array of strings, but an element is a number"],
    );
    // So is an element holding a macro.
    assert_error(
        &with_file("\"a\" : \"$d$/b\""),
        2,
        16,
        &["uses the macro '$d$'"],
    );
    assert_error(
        &with_file("\"\""),
        2,
        10,
        &["parameter 'file' must not be an empty path"],
    );
    assert_error(
        &with_file("unknown + \"x\""),
        2,
        10,
        &["parameter 'file'", "unknown name 'unknown'"],
    );
    assert_error(&with_file("[ a = 1 ]"), 2, 10, &["got a record"]);
}

/// A composite reader of three deserializers: reader-level parameters from the reader
/// record, per-deserializer files, inputs and indexing options, inputs in configuration order.
const COMPOSITE: &str = r#"reader = {
    randomize = false
    maxErrors = 3
    chunkSizeInBytes = 1000
    deserializers = ({
        type = "CNTKTextFormatDeserializer"; module = "CNTKTextFormatReader"
        file = "features.ctf"
        input = { x = { dim = 2; format = "dense" }; z = { dim = 4; format = "sparse" } }
    } : {
        type = "CNTKTextFormatDeserializer"
        file = ("labels-a.ctf" : "labels-b.ctf")
        skipSequenceIds = true
        cacheIndex = true
        chunkSizeInBytes = 77
        input = { y = { dim = 5; format = "sparse"; alias = "x"; definesMBSize = true } }
    } : {
        type = "CNTKTextFormatDeserializer"
        file = "weights.ctf"
        input = { w = { dim = 1; format = "dense" } }
    })
}
"#;

#[test]
fn composite_reader_of_three_deserializers() {
    let c = read(COMPOSITE);
    assert_eq!(c.form, ReaderForm::Composite);
    assert!(c.is_composite());
    assert_eq!(c.deserializer_count(), 3);
    let names: Vec<&str> = c.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["x", "z", "y", "w"]);
    assert_eq!(c.mb_size_input(), Some(2));
    assert_eq!((c.randomize, c.max_errors), (false, 3));
    assert_eq!(c.files, ["features.ctf"]);
    assert_eq!(
        (c.chunk_size_in_bytes, c.skip_sequence_ids, c.cache_index),
        (1000, false, false)
    );
    let labels = c.deserializer_config(1);
    assert_eq!(labels.files, ["labels-a.ctf", "labels-b.ctf"]);
    assert_eq!(
        (
            labels.chunk_size_in_bytes,
            labels.skip_sequence_ids,
            labels.cache_index
        ),
        (77, true, true)
    );
    assert_eq!(labels.inputs.len(), 1);
    assert_eq!(
        labels.inputs[0].alias, "x",
        "aliases may repeat across deserializers"
    );
    assert_eq!(labels.mb_size_input(), Some(0));
    assert_eq!((labels.randomize, labels.max_errors), (false, 3));
    let weights = c.deserializer_config(2);
    assert_eq!(weights.files, ["weights.ctf"]);
    assert_eq!(
        weights.chunk_size_in_bytes, 1000,
        "found in the reader record"
    );
    assert_eq!(weights.inputs[0].name, "w");
    let primary = c.deserializer_config(0);
    assert_eq!(primary.inputs.len(), 2);
    assert!(!primary.is_composite());

    // The builder describes the same reader.
    let built = ReaderConfig::builder()
        .file("features.ctf")
        .inputs([InputConfig::dense("x", 2), InputConfig::sparse("z", 4)])
        .randomize(false)
        .max_errors(3)
        .chunk_size_in_bytes(1000)
        .then_deserializer()
        .files(["labels-a.ctf", "labels-b.ctf"])
        .skip_sequence_ids(true)
        .cache_index(true)
        .chunk_size_in_bytes(77)
        .input(
            InputConfig::sparse("y", 5)
                .with_alias("x")
                .defining_mb_size(),
        )
        .then_deserializer()
        .file("weights.ctf")
        .chunk_size_in_bytes(1000)
        .input(InputConfig::dense("w", 1))
        .build()
        .unwrap();
    assert_eq!(built, c);
}

#[test]
fn composite_reader_errors() {
    let two = |second_inputs: &str, second_extra: &str| {
        format!(
            "reader = {{\n  deserializers = ({{ type = \"CNTKTextFormatDeserializer\"; file = \"a\"; input = {{ x = {{ dim = 1; format = \"dense\"; definesMBSize = true }} }} }} :\n  {{ type = \"CNTKTextFormatDeserializer\"; {second_extra} input = {{ {second_inputs} }} }})\n}}\n"
        )
    };
    let e = error_in(&two("y = { dim = 1; format = \"dense\" }", ""), None);
    assert!(
        e.message()
            .contains("deserializer 2 is missing required parameter 'file'"),
        "{e}"
    );
    assert_eq!(e.line(), 3, "{e}");
    let e = error_in(
        &two("X = { dim = 1; format = \"dense\" }", "file = \"b\";"),
        None,
    );
    assert!(
        e.message()
            .contains("input 'X' is declared by deserializers 1 and 2 ('x')"),
        "{e}"
    );
    let e = error_in(
        &two(
            "y = { dim = 1; format = \"dense\"; definesMBSize = true }",
            "file = \"b\";",
        ),
        None,
    );
    assert!(
        e.message()
            .contains("only one input may set 'definesMBSize', but 2 do: x, y"),
        "{e}"
    );
    let e = error_in(
        "reader = {\n  deserializers = ({ type = \"CNTKTextFormatDeserializer\"; file = \"a\"; input = { x = { dim = 1; format = \"dense\" } } } : 3)\n}\n",
        None,
    );
    assert!(
        e.message()
            .contains("each of 'deserializers' must be a record, got"),
        "{e}"
    );
    // Inputs must follow each other and belong to a deserializer.
    let mut c = ReaderConfig::builder()
        .file("a")
        .input(InputConfig::dense("x", 1))
        .then_deserializer()
        .file("b")
        .input(InputConfig::dense("y", 1))
        .build()
        .unwrap();
    let mut stray = c.clone();
    stray.inputs.push(InputConfig::dense("z", 1));
    let e = ctf_reader::config::ReaderConfigBuilder::from_config(stray)
        .build()
        .unwrap_err();
    assert!(
        e.message().contains("inputs 2.. belong to no deserializer"),
        "{e}"
    );
    let mut beyond = c.clone();
    beyond.joined[0].inputs = 1..3;
    let e = ctf_reader::config::ReaderConfigBuilder::from_config(beyond)
        .build()
        .unwrap_err();
    assert!(
        e.message().contains("must follow those of the one before"),
        "{e}"
    );
    c.joined[0].inputs = 1..1;
    let e = ctf_reader::config::ReaderConfigBuilder::from_config(c)
        .build()
        .unwrap_err();
    assert!(
        e.message().contains("deserializer 2 defines no inputs"),
        "{e}"
    );
}

#[test]
fn wrong_reader_kinds() {
    assert_error(
        "reader = [\n  readerType = \"HTKMLFReader\"\n  file = \"a\"\n]",
        2,
        16,
        &["unsupported readerType 'HTKMLFReader': only 'CNTKTextFormatReader' is supported"],
    );
    let composite =
        |deserializers: &str| format!("reader = {{\n  deserializers = {deserializers}\n}}\n");
    let ctf = "{ type = \"CNTKTextFormatDeserializer\"; file = \"a\"; input = { x = { dim = 1; format = \"dense\" } } }";
    let e = error_in(&composite(&format!("({ctf} : {ctf})")), None);
    assert_eq!(e.line(), 2, "{e}");
    assert!(
        e.message().contains(
            "input 'x' is declared by deserializers 1 and 2 ('x'); input names must be unique \
             across the reader"
        ),
        "{e}"
    );
    // The second `x` is the one reported.
    let second_x = composite(&format!("({ctf} : {ctf})"))
        .lines()
        .nth(1)
        .unwrap()
        .rfind("x = ")
        .unwrap();
    assert_eq!(e.col() as usize, second_x + 1, "{e}");
    assert_error(
        &composite("({ type = \"ImageDeserializer\"; file = \"a\" })"),
        2,
        29,
        &["unsupported deserializer type 'ImageDeserializer'"],
    );
    assert_error(
        &composite("({ file = \"a\" })"),
        2,
        20,
        &["deserializer is missing required parameter 'type'"],
    );
    assert_error(
        &composite("({ type = \"CNTKTextFormatDeserializer\"; module = \"Other\" })"),
        2,
        68,
        &["unsupported deserializer module 'Other'"],
    );
    assert_error(
        &composite("3"),
        2,
        19,
        &["'deserializers' must be a record or an array of records"],
    );
    // The wrong element is pointed at (audit B6, repro/des_elem.cntk).
    assert_error(
        &composite("({ a = 1 } : 2)"),
        2,
        32,
        &["each of 'deserializers' must be a record"],
    );
    assert_error(
        &composite(&format!("({ctf} :\n    \"oops\")")),
        3,
        5,
        &["each of 'deserializers' must be a record, got a string"],
    );
    // One record in parentheses is the one-element array of the composite form.
    let (c, _) = read_section(&composite(&format!("({ctf})")), None);
    assert_eq!(c.form, ReaderForm::Composite);
    let (c, _) = read_section(&composite(&format!("[| {ctf} |]")), None);
    assert_eq!(c.files, ["a"]);
}

#[test]
fn syntax_errors_have_positions() {
    let e = error_in("reader = [\n  file = \"a\n", None);
    assert_eq!(
        e.to_string(),
        "test.cntk:2:10: error: string without closing quotation mark"
    );
    let e = error_in("reader = [ file = 1 input = 2 ]", None);
    assert_eq!((e.line(), e.col()), (1, 21));
    assert!(e.message().contains("';' or a line break"), "{e}");
    let e = error_in("a = 1\nreader = [\n", None);
    assert_eq!((e.line(), e.col()), (2, 10));
    // A key given twice is an error where the reader reads it.
    let e = error_in(
        "reader = [ file = \"a\"\n file = \"b\"\n input = [ x = [ dim = 1 ; format = \"dense\" ] ] ]",
        None,
    );
    assert!(
        e.message()
            .contains("duplicate member 'file' (first defined at 1:12)"),
        "{e}"
    );
}

/// Real CNTK configuration files (microsoft/CNTK's Examples and Tests) carry legacy text that
/// is not BrainScript in keys the reader never reads; CNTK's legacy parser keeps values as
/// text, so they are no error there. Each used to fail the whole file.
#[test]
fn legacy_text_in_keys_the_reader_does_not_read_is_no_error() {
    let reader = "reader = [ readerType = \"CNTKTextFormatReader\" ; file = \"d.ctf\"\n\
                  input = [ x = [ dim = 1 ; format = \"dense\" ] ] ]";
    let unused = [
        "OutputDir = ./work\nDataDir = ../Data",
        "test = [ modelPath=$ModelDir$/03_ConvBatchNorm ]",
        "Write = [ outputNodeNames = (ol, regrLabels, rmse) ]",
        "net = [ include \"Shared.bs\"\n x = 1 ]",
        "command = A\ncommand = B",
        "mask = 0x10",
    ];
    for text in unused {
        let (c, _) = read_section(&format!("{text}\n{reader}"), None);
        assert_eq!(c.files, ["d.ctf"], "{text}");
    }
    // Read by the reader, the same text is an error at its place.
    let e = error_in(
        "reader = [ file = ./d.ctf ; input = [ x = [ dim = 1 ; format = \"dense\" ] ] ]",
        None,
    );
    assert_eq!((e.line(), e.col()), (1, 19), "{e}");
    assert!(e.message().contains("write a path in quotes"), "{e}");
    let e = error_in(
        "reader = [ file = \"d\" ; randomizationWindow = 1e3x ; input = [ x = [ dim = 1 ; format = \"dense\" ] ] ]",
        None,
    );
    assert!(e.message().contains("invalid number '1e3x'"), "{e}");
    // An include where the reader lists or looks up members: its text might define them.
    let e = error_in(
        "reader = [ include \"r.bs\"\n file = \"d\" ; input = [ x = [ dim = 1 ; format = \"dense\" ] ] ]",
        None,
    );
    assert_eq!((e.line(), e.col()), (1, 12), "{e}");
    assert!(e.message().contains("'include' is not supported"), "{e}");
    let e = error_in(
        "train = [ include \"r.bs\"\n reader = [ file = \"d\" ; input = [ x = [ dim = 1 ; format = \"dense\" ] ] ] ]",
        Some("train"),
    );
    assert!(e.message().contains("'include' is not supported"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Warnings.
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_keys_are_warnings_with_suggestions() {
    let text = legacy(
        "    radnomize = false\n    labelMappingFile = \"x\"",
        "        x = [ dim = 3; format = \"dense\"; dimm = 4 ]",
    );
    let (c, warnings) = read_section(&text, None);
    assert!(c.randomize, "the misspelled key is ignored");
    let shown: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "test.cntk:4:5: warning: unknown reader parameter 'radnomize'; did you mean 'randomize'?",
            "test.cntk:5:5: warning: unknown reader parameter 'labelMappingFile'",
            "test.cntk:7:42: warning: unknown parameter 'dimm' in input 'x'; did you mean 'dim'?",
        ]
    );
    assert_eq!((warnings[0].line(), warnings[0].col()), (4, 5));
    assert!(warnings[0]
        .message()
        .starts_with("unknown reader parameter"));
    assert_eq!(warnings[0].source_name(), SOURCE);
}

#[test]
fn known_keys_do_not_warn() {
    let text = r#"
precisionX = 1
train = [
    unrelated = 1
    reader = {
        randomize = true; truncated = false; truncationLength = 0
        multiThreadedDeserialization = false; localTimeline = true; checkData = true
        useNumericSequenceKeys = true; hashSequenceKeys = false
        numDataPartitions = 1; partitionIndex = 0; randomizer = "block"
        frameMode = false; verbosity = 1
        miniBatchMode = "partial"; numChunksToCache = 32
        deserializers = ({
            type = "CNTKTextFormatDeserializer"; module = "CNTKTextFormatReader"
            file = "a"; chunkSizeInBytes = 100; cacheIndex = true; precision = "float"
            input = { x = { dim = 1; format = "dense"; alias = "X"; definesMBSize = false } }
        })
    }
]
"#;
    let (c, warnings) = read_section(text, None);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(c.chunk_size_in_bytes, 100);
}

/// An unquoted path (`file = data/train.ctf`, which CNTK's legacy parser took as text) is an
/// expression in BrainScript; the error says to quote it.
#[test]
fn an_unquoted_path_is_an_error_that_says_to_quote_it() {
    let text =
        "reader = [\n  file = data/train.ctf\n  input = [ x = [ dim = 1 ; format = dense ] ]\n]\n";
    let err = ReaderConfig::from_brainscript(text, SOURCE, None).unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with("test.cntk:2:10: error: parameter 'file'"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "unknown name 'data'; write a path in quotes, as in file = \"data/train.ctf\""
        ),
        "{shown}"
    );
    // Another parameter's unknown name gets no such hint.
    let text = "reader = [\n  file = \"a\"\n  maxErrors = n + 1\n  input = [ x = [ dim = 1 ; format = dense ] ]\n]\n";
    let err = ReaderConfig::from_brainscript(text, SOURCE, None).unwrap_err();
    assert!(!err.to_string().contains("quotes"), "{err}");
}

/// `truncated = true` asks for CNTK's truncated-BPTT packing, which is not implemented: a
/// warning at its value says minibatches hold whole sequences (it was accepted silently).
/// False says nothing; a value that is not a boolean is an error.
#[test]
fn truncated_true_is_a_warning_that_sequences_stay_whole() {
    for (value, warned) in [("true", true), ("1", true), ("false", false)] {
        let text = format!(
            "reader = [ file = \"a\" ; truncated = {value} ; truncationLength = 20\n\
             input = [ x = [ dim = 1 ; format = \"dense\" ] ] ]\n"
        );
        let (_, warnings) = read_section(&text, None);
        let shown: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        if warned {
            assert_eq!(shown.len(), 1, "{value}: {shown:?}");
            assert!(
                shown[0].starts_with("test.cntk:1:37: warning: 'truncated = true' "),
                "{shown:?}"
            );
            assert!(
                shown[0].ends_with("minibatches hold whole sequences"),
                "{shown:?}"
            );
        } else {
            assert!(shown.is_empty(), "{value}: {shown:?}");
        }
    }
    let text = "reader = [ file = \"a\" ; truncated = \"often\"\n\
                input = [ x = [ dim = 1 ; format = \"dense\" ] ] ]\n";
    let err = ReaderConfig::from_brainscript(text, SOURCE, None).unwrap_err();
    assert!(
        err.to_string()
            .contains("parameter 'truncated' must be a boolean"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// A realistic complete CNTK configuration.
// ---------------------------------------------------------------------------------------

const FULL_CONFIG: &str = r#"# MNIST, one hidden layer
RootDir = ".."
DataDir = "$RootDir$/DataSets/MNIST"
ModelDir = "Output/Models"
OutputDir = "Output"

command = train:test
precision = "float"
modelPath = "$ModelDir$/01_OneHidden"
deviceId = $DeviceId$
imageLayout = "cudnn"
traceLevel = 1
numMBsToShowResult = 500

train = [
    action = "train"

    BrainScriptNetworkBuilder = {
        imageShape = 28:28:1
        labelDim = 10
        hiddenDim = 200
        featScale = Constant (1/256)
        Scale{f} = x => Constant(f) .* x
        model = Sequential (
            Scale {featScale} :
            DenseLayer {hiddenDim, activation = ReLU} :
            DenseLayer {labelDim}
        )
        features = Input {imageShape}
        labels = Input {labelDim}
        z = model (features)
        ce = CrossEntropyWithSoftmax (labels, z)
        errs = ClassificationError (labels, z)
        top5Errs = ClassificationError (labels, z, topN=5)
        featureNodes = (features)
        labelNodes = (labels)
        criterionNodes = (ce)
        evaluationNodes = (errs : top5Errs)
        outputNodes = (z)
        net = (new ComputationNetwork [ outputNodes = z ])
        layers[i:1..3] = if i == 1 then features else DenseLayer {hiddenDim} (layers[i-1])
        gpu = $DeviceId$ >= 0
    }

    SGD = [
        epochSize = 60000
        minibatchSize = 64
        learningRatesPerSample = 0.01*5:0.005
        momentumAsTimeConstant = 0
        maxEpochs = 10
        dropoutRate = 0.0*2:0.5
        parallelTrain = [
            parallelizationMethod = DataParallelSGD
            distributedMBReading = true
            dataParallelSGD = [ gradientBits = 32 ]
        ]
    ]

    reader = [
        readerType = "CNTKTextFormatReader"
        # See ../REAMDE.md for details on getting the data (Train-28x28_cntk_text.txt).
        file = "Train-28x28_cntk_text.txt"
        input = [
            features = [
                dim = 28 * 28
                format = "dense"
            ]
            labels = [
                dim = 10
                format = "dense"
            ]
        ]
    ]
]

test = [
    action = "test"
    minibatchSize = 1024
    evalNodeNames = errs:top5Errs

    reader = [
        readerType = "CNTKTextFormatReader"
        file = "Test-28x28_cntk_text.txt"
        randomize = false
        input = [
            features = [ dim = 784; format = "dense" ]
            labels = [ dim = 10; format = "dense" ]
        ]
    ]
]
"#;

#[test]
fn full_config_with_a_section() {
    let doc = ConfigDocument::parse(FULL_CONFIG, "01_OneHidden.cntk").unwrap();
    assert_eq!(doc.source_name(), "01_OneHidden.cntk");
    let (c, warnings) = doc.reader_config(Some("train")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(c.files, ["Train-28x28_cntk_text.txt"]);
    assert_eq!(
        c.inputs,
        [
            InputConfig::dense("features", 784),
            InputConfig::dense("labels", 10)
        ]
    );
    assert_eq!(c.precision, Precision::Float);
    assert_eq!(c.trace_level, 1);
    assert!(c.randomize);
    let (c, _) = doc.reader_config(Some("test")).unwrap();
    assert_eq!(c.files, ["Test-28x28_cntk_text.txt"]);
    assert!(!c.randomize);
}

#[test]
fn full_config_without_a_section_lists_the_candidates() {
    let e = ConfigDocument::parse(FULL_CONFIG, "01_OneHidden.cntk")
        .unwrap()
        .reader_config(None)
        .unwrap_err();
    assert!(e.message().contains("train.reader (59:5)"), "{e}");
    assert!(e.message().contains("test.reader (81:5)"), "{e}");
    assert!(
        e.to_string()
            .starts_with("01_OneHidden.cntk: error: several reader sections found"),
        "{e}"
    );
}

#[test]
fn full_config_evaluates_network_values_on_request() {
    let doc = ConfigDocument::parse(FULL_CONFIG, "x").unwrap();
    let mut eval = Evaluator::new(doc.root());
    let root = eval.root();
    let Ok(Some(Value::Record(train))) = eval.get(&root, "train") else {
        panic!("train is a record")
    };
    let Ok(Some(Value::Record(net))) = eval.get(&train, "BrainScriptNetworkBuilder") else {
        panic!("the network builder is a record")
    };
    assert!(matches!(eval.get(&net, "hiddenDim"), Ok(Some(Value::Number(n))) if n == 200.0));
    assert!(matches!(eval.get(&net, "imageShape"), Ok(Some(Value::Array(a))) if a.len() == 3));
    let e = eval.get(&net, "gpu").unwrap_err();
    assert_eq!(e.to_string(), "42:15: macro '$DeviceId$' is not supported; replace it with its value in the configuration");
    let e = eval.get(&net, "z").unwrap_err();
    assert!(e.message().contains("a call of function 'model'"), "{e}");
    assert_eq!(e.pos().line, 31);
}

// ---------------------------------------------------------------------------------------
// Files, builder, robustness.
// ---------------------------------------------------------------------------------------

#[test]
fn from_file_reads_and_names_the_file() {
    let dir = std::env::temp_dir().join(format!("ctf-reader-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("reader.cntk");
    std::fs::write(&path, SEED_SIMPLE.replace("dim = 5", "dim = 0")).unwrap();
    let e = ReaderConfig::from_file(&path, None).unwrap_err();
    assert_eq!(e.source_name(), path.display().to_string());
    assert!(
        e.to_string()
            .starts_with(&format!("{}:9:19: error:", path.display())),
        "{e}"
    );
    std::fs::write(&path, SEED_SIMPLE).unwrap();
    let (c, _) = ReaderConfig::from_file(&path, Some("reader")).unwrap();
    assert_eq!(c.inputs.len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();

    let missing = Path::new("/nonexistent/dir/config.cntk");
    let e = ReaderConfig::from_file(missing, None).unwrap_err();
    assert!(
        e.message()
            .contains("cannot read configuration file '/nonexistent/dir/config.cntk'"),
        "{e}"
    );
    assert_eq!((e.line(), e.col()), (0, 0));
}

#[test]
fn builder_validates_like_brainscript() {
    let e = ReaderConfig::builder()
        .file("a")
        .input(InputConfig::dense("x", 0))
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "error: parameter 'dim' of input 'x' must be a positive integer, got 0"
    );
    let text = legacy("", "        x = [ dim = 0; format = \"dense\" ]");
    assert_eq!(error_in(&text, None).message(), e.message());
    let e = ReaderConfig::builder()
        .file("a")
        .input(InputConfig::dense("x", 1))
        .input(InputConfig::dense("X", 1))
        .build()
        .unwrap_err();
    assert!(e.message().contains("collide"), "{e}");
}

#[test]
fn errors_are_std_errors() {
    fn takes(_: &dyn std::error::Error) {}
    let e = error_in("", None);
    takes(&e);
}

mod robustness {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = ReaderConfig::from_brainscript(&text, "p", None);
        }

        #[test]
        fn brainscript_like_text_never_panics(
            text in "([a-z]{1,3}|[ \\n;,=:.+*/()\\[\\]{}\"'$#!<>|&-]|[0-9.e]{1,4}|if |then |else |new |array ){0,80}"
        ) {
            let _ = ReaderConfig::from_brainscript(&text, "p", None);
            let _ = ReaderConfig::from_brainscript(&text, "p", Some("a.reader"));
        }

        #[test]
        fn truncated_configs_never_panic(cut in 0usize..FULL_CONFIG.len()) {
            let text = FULL_CONFIG.get(..cut).unwrap_or("");
            let _ = ReaderConfig::from_brainscript(text, "p", Some("train"));
        }
    }
}

#[test]
fn errors_carry_the_warnings_found_before_them() {
    let text = "reader = [\n  file = \"d.ctf\"\n  radnomize = false\n  input = [ a = [ dim = 1 ; format = \"dence\" ] ]\n]\n";
    let err = ReaderConfig::from_brainscript(text, "t.cntk", None).unwrap_err();
    assert!(err.message().contains("unknown format 'dence'"), "{err}");
    let warnings: Vec<String> = err.warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(
        warnings,
        ["t.cntk:3:3: warning: unknown reader parameter 'radnomize'; did you mean 'randomize'?"]
    );
}

// ---------------------------------------------------------------------------------------
// Timeline keys: randomizer, data partitions, window combinations.
// ---------------------------------------------------------------------------------------

#[test]
fn randomizer_and_partition_keys() {
    use ctf_reader::{RandomizerKind, WindowSize};
    let c = read(&legacy("", ONE_INPUT));
    assert_eq!(c.randomizer, RandomizerKind::Block);
    assert_eq!((c.partition_index, c.num_data_partitions), (0, 1));
    assert_eq!(c.window(), WindowSize::Chunks(128));
    let c = read(&legacy(
        "    randomizer = \"cntk\"\n    numDataPartitions = 4\n    partitionIndex = 3\n    randomizationWindow = 7",
        ONE_INPUT,
    ));
    assert_eq!(c.randomizer, RandomizerKind::Cntk);
    assert_eq!((c.partition_index, c.num_data_partitions), (3, 4));
    assert_eq!(c.window(), WindowSize::Chunks(7));
    let c = read(&legacy(
        "    sampleBasedRandomizationWindow = true\n    randomizationWindow = 1000",
        ONE_INPUT,
    ));
    assert_eq!(c.window(), WindowSize::Samples(1000));
}

/// The default window is about 4 GiB of data worth of chunks, `4 GiB / chunkSizeInBytes` in
/// integer division (seed 001: "128 when the chunk size equals 32MB"; CNTK-BEHAVIOUR §5.5),
/// not 128 chunks whatever the chunk size. Expected values: 4294967296 / 20 = 214748364.8,
/// 4294967296 / 10000 = 429496.7296, 4294967296 / 8589934592 = 0.5.
#[test]
fn default_window_is_four_gib_of_chunks() {
    use ctf_reader::WindowSize;
    let window_of = |params: &str| read(&legacy(params, ONE_INPUT)).window();
    assert_eq!(window_of(""), WindowSize::Chunks(128));
    assert_eq!(
        window_of("    chunkSizeInBytes = 20"),
        WindowSize::Chunks(214_748_364)
    );
    assert_eq!(
        window_of("    chunkSizeInBytes = 10000"),
        WindowSize::Chunks(429_496)
    );
    // Chunks above 4 GiB: 0 chunks, file order, as CNTK's legacy reader (its NoRandomizer).
    let c = read(&legacy("    chunkSizeInBytes = 8589934592", ONE_INPUT));
    assert_eq!(c.window(), WindowSize::Chunks(0));
    assert!(!c.shuffles());
    // One sequence per chunk, where CNTK divides by zero: the whole data.
    assert_eq!(
        window_of("    chunkSizeInBytes = 0"),
        WindowSize::Chunks(u64::MAX)
    );
    // A window that is set is kept.
    assert_eq!(
        window_of("    chunkSizeInBytes = 20\n    randomizationWindow = 128"),
        WindowSize::Chunks(128)
    );
    // The builder computes the same default.
    let c = ReaderConfig::builder()
        .file("a.ctf")
        .input(InputConfig::dense("x", 1))
        .chunk_size_in_bytes(10_000)
        .build()
        .unwrap();
    assert_eq!(c.window(), WindowSize::Chunks(429_496));
}

/// A composite reader sizes the default window by the reader-level `chunkSizeInBytes` (the
/// reader record's, or an enclosing record's), not by a deserializer's own, as CNTK's
/// `CompositeDataReader.cpp` does.
#[test]
fn composite_default_window_uses_the_reader_level_chunk_size() {
    use ctf_reader::WindowSize;
    let composite = |reader: &str, deserializer: &str| {
        format!(
            "reader = {{\n  {reader}\n  deserializers = ({{ type = \"CNTKTextFormatDeserializer\"; file = \"a\"\n    {deserializer}\n    input = {{ x = {{ dim = 1; format = \"dense\" }} }} }})\n}}\n"
        )
    };
    let c = read(&composite("chunkSizeInBytes = 10000", ""));
    assert_eq!(c.chunk_size_in_bytes, 10_000);
    assert_eq!(c.window(), WindowSize::Chunks(429_496));
    // Small chunks in the deserializer only: the reader level is 32 MiB, so 128 chunks.
    let c = read(&composite("", "chunkSizeInBytes = 20"));
    assert_eq!(c.chunk_size_in_bytes, 20);
    assert_eq!(c.window(), WindowSize::Chunks(128));
    // Both: the reader's (4294967296 / 50000 = 85899.3).
    let c = read(&composite(
        "chunkSizeInBytes = 50000",
        "chunkSizeInBytes = 20",
    ));
    assert_eq!(c.chunk_size_in_bytes, 20);
    assert_eq!(c.window(), WindowSize::Chunks(85_899));
    // An enclosing record's chunk size is the reader level too.
    let c = read(&format!(
        "chunkSizeInBytes = 10000\n{}",
        composite("", "chunkSizeInBytes = 20")
    ));
    assert_eq!(c.window(), WindowSize::Chunks(429_496));
}

/// `sampleBasedRandomizationWindow = true` without a `randomizationWindow`: in the legacy
/// form the window is the whole data (seed 001: "defaults either to the size of the whole
/// dataset in samples"; CNTK-BEHAVIOUR §5.5: `SIZE_MAX>>2` samples); the composite form keeps
/// CNTK's error (`CompositeDataReader.cpp` raises a LogicError).
#[test]
fn sample_based_window_without_a_size_is_the_whole_data_in_the_legacy_form() {
    use ctf_reader::WindowSize;
    let c = read(&legacy(
        "    sampleBasedRandomizationWindow = true",
        ONE_INPUT,
    ));
    assert_eq!(c.window(), WindowSize::Samples(u64::MAX));
    assert!(c.shuffles());
    // Composite: an error at the key (line 2, column 3).
    let text = "reader = {\n  sampleBasedRandomizationWindow = true\n  deserializers = ({ type = \"CNTKTextFormatDeserializer\"; file = \"a\"\n    input = { x = { dim = 1; format = \"dense\" } } })\n}\n";
    assert_error(
        text,
        2,
        3,
        &["'sampleBasedRandomizationWindow = true' needs a 'randomizationWindow' in samples"],
    );
}

/// With `randomize = false` the window settings are ignored (seed 001: "this parameter is
/// ignored, when randomize is false"), in both forms: no error, file order.
#[test]
fn window_settings_are_ignored_without_randomization() {
    for params in [
        "    randomize = false; sampleBasedRandomizationWindow = true",
        "    randomize = false; sampleBasedRandomizationWindow = true; randomizationWindow = 0",
    ] {
        let c = read(&legacy(params, ONE_INPUT));
        assert!(!c.randomize && !c.shuffles(), "{params}");
    }
    let composite = |reader: &str| {
        format!(
            "reader = {{\n  {reader}\n  deserializers = ({{ type = \"CNTKTextFormatDeserializer\"; file = \"a\"\n    input = {{ x = {{ dim = 1; format = \"dense\" }} }} }})\n}}\n"
        )
    };
    let c = read(&composite(
        "randomize = false; sampleBasedRandomizationWindow = true",
    ));
    assert_eq!(c.form, ReaderForm::Composite);
    assert!(!c.randomize && !c.shuffles());
}

#[test]
fn invalid_timeline_settings_are_clear_errors() {
    // Each error points at the value that is wrong, or for a relation between two keys, at
    // the key that is wrong (the parameters start on line 4).
    for (params, line, col, fragment) in [
        (
            "    randomizer = \"fancy\"",
            4,
            18,
            "must be 'block' or 'cntk'",
        ),
        (
            "    numDataPartitions = 0",
            4,
            25,
            "'numDataPartitions' must be at least 1",
        ),
        (
            "    numDataPartitions = 2\n    partitionIndex = 2",
            5,
            5,
            "'partitionIndex' (2) must be below 'numDataPartitions' (2)",
        ),
        (
            "    partitionIndex = 2; numDataPartitions = 2",
            4,
            5,
            "'partitionIndex' (2) must be below 'numDataPartitions' (2)",
        ),
        (
            "    numDataPartitions = 2; partitionIndex = 2",
            4,
            28,
            "'partitionIndex' (2) must be below 'numDataPartitions' (2)",
        ),
        (
            "    sampleBasedRandomizationWindow = true\n    randomizationWindow = 0",
            5,
            5,
            "at least 1 sample",
        ),
    ] {
        assert_error(&legacy(params, ONE_INPUT), line, col, &[fragment]);
    }
    // A key found in an enclosing record is pointed at there.
    let text = format!(
        "train = [\n  numDataPartitions = 0\n  {}]\n",
        legacy("", ONE_INPUT)
    );
    assert_error(&text, 2, 23, &["'numDataPartitions' must be at least 1"]);
    // So is the key of a composite reader's first deserializer.
    let text = "reader = {\n  deserializers = ({ type = \"CNTKTextFormatDeserializer\"; file = \"a\"\n    numDataPartitions = 3; partitionIndex = 7\n    input = { x = { dim = 1; format = \"dense\" } } })\n}\n";
    assert_error(text, 3, 28, &["'partitionIndex' (7) must be below"]);
}

/// A composite reader of two deserializers, `first` and `second` extra members of each,
/// `params` of the reader record: every line starts at column 5 after the first.
fn two_deserializers(params: &str, first: &str, second: &str) -> String {
    format!(
        "reader = {{\n    {params}\n    deserializers = ({{\n    type = \"CNTKTextFormatDeserializer\"; file = \"a\"\n    {first}\n    input = {{ x = {{ dim = 1; format = \"dense\" }} }}\n    }} : {{\n    type = \"CNTKTextFormatDeserializer\"; file = \"b\"\n    {second}\n    input = {{ y = {{ dim = 1; format = \"dense\" }} }}\n    }})\n}}\n"
    )
}

#[test]
fn joined_deserializer_errors_point_at_their_key() {
    // Line 8 holds the second deserializer's file (its value at column 49), line 10 its
    // inputs.
    let text = two_deserializers("", "", "").replace("file = \"b\"", "file = \" \"");
    let e = error_in(&text, None);
    assert_eq!(
        e.to_string(),
        "test.cntk:8:49: error: parameter 'file' of deserializer 2 must not be an empty path",
    );
    let text = two_deserializers("", "", "").replace("y = { dim = 1; format = \"dense\" }", "");
    assert_error(&text, 10, 13, &["deserializer 2 defines no inputs"]);
}

#[test]
fn reader_level_keys_of_a_later_deserializer_must_agree() {
    // Line 2 holds the reader record's members, line 5 the first deserializer's, line 9 the
    // second one's; each key at column 5.
    for (key, value, differing) in [
        ("precision", "\"double\"", "\"float\""),
        ("randomize", "false", "true"),
        ("randomizationSeed", "3", "4"),
        ("randomizationWindow", "5", "6"),
        ("sampleBasedRandomizationWindow", "false", "true"),
        ("keepDataInMemory", "true", "false"),
        ("frameMode", "true", "false"),
        ("maxErrors", "2", "0"),
        ("traceLevel", "0", "2"),
        ("verbosity", "1", "0"),
        ("randomizer", "\"cntk\"", "\"block\""),
        ("numDataPartitions", "4", "2"),
        ("partitionIndex", "0", "1"),
    ] {
        let given = format!("{key} = {value}");
        let other = format!("{key} = {differing}");
        // The same value anywhere is accepted, and holds for the whole reader.
        let agreeing = [
            two_deserializers(&given, "", &given),
            two_deserializers("", &given, &given),
            two_deserializers(&given, &given, &given),
            two_deserializers(&given, &given, ""),
        ];
        let expected = read(&two_deserializers(&given, "", ""));
        for text in &agreeing {
            assert_eq!(read(text), expected, "{text}");
        }
        // A differing value in a later deserializer is an error at its key, whether the
        // value in effect is written (in the reader record or the first deserializer) or
        // the default.
        for (text, whence) in [
            (two_deserializers(&given, "", &other), "given at 2:5"),
            (two_deserializers("", &given, &other), "given at 5:5"),
            (two_deserializers(&other, &given, &given), "given at 5:5"),
        ] {
            let place = if text.lines().nth(1) == Some(&format!("    {other}")[..]) {
                (2, "the reader record")
            } else {
                (9, "deserializer 2")
            };
            assert_error(
                &text,
                place.0,
                5,
                &[
                    &format!("parameter '{key}' of {}", place.1),
                    &format!("({whence}); a reader-level parameter holds for every deserializer"),
                ],
            );
        }
        if !matches!(key, "sampleBasedRandomizationWindow" | "partitionIndex") {
            // A value other than the default (the two skipped give the default) against it.
            assert_error(&two_deserializers("", "", &given), 9, 5, &["(the default)"]);
        }
    }
    // The repro: `precision = "double"` only in the second deserializer.
    assert_error(
        &two_deserializers("", "", "precision = \"double\""),
        9,
        5,
        &[
            "parameter 'precision' of deserializer 2 is 'double', but the reader uses 'float' \
           (the default); a reader-level parameter holds for every deserializer",
        ],
    );
    // A record enclosing the reader gives its values too (CNTK reads the reader's keys
    // outward from the reader record): they must agree with the first deserializer's.
    for (key, value, differing) in [
        ("precision", "\"double\"", "\"float\""),
        ("maxErrors", "3", "5"),
    ] {
        let around = |text: String| format!("{key} = {value}\n{text}");
        let given = format!("{key} = {value}");
        assert_eq!(
            read(&around(two_deserializers("", &given, ""))),
            read(&two_deserializers(&given, "", ""))
        );
        assert_error(
            &around(two_deserializers("", &format!("{key} = {differing}"), "")),
            1,
            1,
            &[&format!(
                "parameter '{key}' of a record enclosing the reader is {}",
                value.replace('"', "'")
            )],
        );
    }
    // The default window written out agrees with the default (128 chunks); another does not.
    assert_eq!(
        read(&two_deserializers("", "", "randomizationWindow = 128")),
        read(&two_deserializers("", "", ""))
    );
    assert_error(
        &two_deserializers("", "", "randomizationWindow = 127"),
        9,
        5,
        &["is 127, but the reader uses 128 (the default)"],
    );
    // `default` in a later deserializer means the default, which must agree too.
    assert_error(
        &two_deserializers("precision = \"double\"", "", "precision = default"),
        9,
        5,
        &["is 'float', but the reader uses 'double' (given at 2:5)"],
    );
    // The deserializers' own parameters may differ.
    let c = read(&two_deserializers(
        "",
        "skipSequenceIds = true; chunkSizeInBytes = 10; cacheIndex = true",
        "skipSequenceIds = false; chunkSizeInBytes = 20; cacheIndex = false",
    ));
    assert!(c.skip_sequence_ids && c.cache_index && !c.joined[0].skip_sequence_ids);
    assert_eq!(
        (c.chunk_size_in_bytes, c.joined[0].chunk_size_in_bytes),
        (10, 20)
    );
    // A precision given beside the configuration replaces every one in it: none is read.
    let text = two_deserializers("precision = \"half\"", "", "precision = \"double\"");
    let overrides = ctf_reader::config::ConfigOverrides {
        precision: Some(Precision::Float),
        ..Default::default()
    };
    let (c, _) = ConfigDocument::parse(&text, SOURCE)
        .unwrap()
        .reader_config_with(None, &overrides)
        .unwrap();
    assert_eq!(c.precision, Precision::Float);
}

/// `--max-errors`, `--trace-level` and `--skip-sequence-ids` replace the configuration's
/// values as `--precision` does: the replaced keys are not read, so a macro or a
/// disagreeing value there is no error, and `skipSequenceIds` holds for every deserializer.
#[test]
fn overrides_replace_max_errors_trace_level_and_skip_sequence_ids_unread() {
    let macros = "maxErrors = \"$E$\"; traceLevel = $T$";
    let text = two_deserializers(
        macros,
        "skipSequenceIds = \"$S$\"",
        "maxErrors = 7; traceLevel = 2; skipSequenceIds = $S$",
    );
    let suggested = [
        ("maxErrors", "--max-errors"),
        ("traceLevel", "--trace-level"),
        ("skipSequenceIds", "--skip-sequence-ids"),
    ];
    // Without its override, each macro is an error suggesting its option; each override
    // given moves the error on to the next, until none is left.
    let mut overrides = ctf_reader::config::ConfigOverrides::default();
    let mut reported = Vec::new();
    for _ in suggested {
        let e = ConfigDocument::parse(&text, SOURCE)
            .unwrap()
            .reader_config_with(None, &overrides)
            .unwrap_err();
        let (key, option) = suggested
            .into_iter()
            .find(|(key, _)| e.message().contains(&format!("parameter '{key}'")))
            .unwrap_or_else(|| panic!("{e}"));
        assert!(e.message().contains(&format!("pass {option}")), "{e}");
        match key {
            "maxErrors" => overrides.max_errors = Some(3),
            "traceLevel" => overrides.trace_level = Some(0),
            _ => overrides.skip_sequence_ids = true,
        }
        reported.push(key);
    }
    reported.sort_unstable();
    assert_eq!(reported, ["maxErrors", "skipSequenceIds", "traceLevel"]);
    let (c, _) = ConfigDocument::parse(&text, SOURCE)
        .unwrap()
        .reader_config_with(None, &overrides)
        .unwrap();
    assert_eq!((c.max_errors, c.trace_level), (3, 0));
    assert!(c.skip_sequence_ids && c.joined[0].skip_sequence_ids);
    // Without the overrides, values that disagree between deserializers stay an error.
    let text = two_deserializers("", "maxErrors = 1", "maxErrors = 7");
    assert_error(
        &text,
        9,
        5,
        &["parameter 'maxErrors' of deserializer 2 is 7"],
    );
}

/// `ctf read`'s `--workers` and `--rank` replace `numDataPartitions` and `partitionIndex`
/// as the other overrides replace theirs: a replaced key is not read, so its macro is no
/// error, nor its disagreement across deserializers. A rank out of range is reported at the
/// key the configuration wrote (else at its reader record), naming where each value came
/// from.
#[test]
fn partition_overrides_replace_their_keys_unread_and_errors_name_each_source() {
    let config_with = |text: &str, workers: Option<u32>, rank: Option<u32>| {
        let overrides = ctf_reader::config::ConfigOverrides {
            num_data_partitions: workers,
            partition_index: rank,
            ..Default::default()
        };
        ConfigDocument::parse(text, SOURCE)
            .unwrap()
            .reader_config_with(None, &overrides)
    };
    // Macros in both keys, and a second deserializer that disagrees with the first.
    let text = two_deserializers(
        "numDataPartitions = $K$; partitionIndex = \"$R$\"",
        "",
        "numDataPartitions = 9; partitionIndex = 8",
    );
    let e = config_with(&text, None, Some(1)).unwrap_err();
    assert_eq!((e.line(), e.col()), (2, 25), "{e}");
    assert!(e.message().contains("pass --workers to ctf read"), "{e}");
    let e = config_with(&text, Some(2), None).unwrap_err();
    assert_eq!((e.line(), e.col()), (2, 47), "{e}");
    assert!(e.message().contains("pass --rank to ctf read"), "{e}");
    let (c, _) = config_with(&text, Some(3), Some(2)).unwrap();
    assert_eq!((c.num_data_partitions, c.partition_index), (3, 2));

    // One value from the configuration, the other from an option: the error is at the
    // configuration's key (line 2 of `legacy`'s parameters is line 4).
    let text = legacy("    numDataPartitions = 2; partitionIndex = 1", ONE_INPUT);
    assert_eq!(
        config_with(&text, Some(2), None).unwrap().0.partition_index,
        1
    );
    assert_eq!(
        config_with(&text, None, Some(0)).unwrap().0.partition_index,
        0
    );
    let e = config_with(&text, Some(1), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.cntk:4:28: error: rank 1 (parameter 'partitionIndex') must be below the number \
         of workers, 1 (--workers)"
    );
    let e = config_with(&text, None, Some(2)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.cntk:4:5: error: rank 2 (--rank) must be below the number of workers, 2 \
         (parameter 'numDataPartitions')"
    );
    // A key the configuration does not set keeps its default, and the error points at the
    // reader record, where it would go.
    let e = config_with(&legacy("", ONE_INPUT), None, Some(1)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.cntk:1:10: error: rank 1 (--rank) must be below the number of workers, 1 (the \
         default; 'numDataPartitions' is not set)"
    );
    // Both from options: no position in the configuration.
    let e = config_with(&text, Some(2), Some(2)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.cntk: error: rank 2 (--rank) must be below the number of workers, 2 (--workers)"
    );
    let e = config_with(&text, Some(0), Some(0)).unwrap_err();
    assert!(
        e.message().starts_with("--workers must be at least 1"),
        "{e}"
    );
}
