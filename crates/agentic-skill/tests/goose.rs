//! Differential test with goose as the oracle: goose is the agent runtime that reads the
//! mounted skills, so a skill we call valid must be a skill goose lists under the same name
//! with the same description.
//!
//! Every generated case of the skills-ref test, the sample skills, every skill of the shared
//! corpus and a few hundred seeded frontmatter variants are laid out in a scratch HOME
//! (`~/.agents/skills/...`, many skills per HOME so goose runs a few times only) and read by
//! `goose skills list`, which shows names, where each skill was found, and descriptions cut to
//! 47 characters, and by `goose run` against a fake OpenAI-compatible endpoint on 127.0.0.1,
//! whose system prompt carries every listed skill's full description. No network, provider
//! or goose configuration is involved.
//!
//! It builds only with the `integration` feature; `make test` sets GOOSE_BIN (the current
//! pin of `hack/install-goose.sh`) and GOOSE_PREVIOUS_BIN (the previous pin), and the test
//! fails without GOOSE_BIN rather than silently checking nothing.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentic_skill::{FindingCode, Report, validate_path};

mod cases;

use cases::{Expect, corpus_dir, corpus_skills, generated_cases};

/// How long one goose command may take: it starts in well under a second here, and a hung
/// one must fail the test rather than stall `make test`.
const GOOSE_TIMEOUT: Duration = Duration::from_secs(120);

/// Seeded frontmatter variants per run.
const VARIANTS: usize = 400;

/// One SKILL.md to lay out, with where it goes and what we make of it.
struct Skill {
    label: String,
    /// `<slot>/<dir>` below `~/.agents/skills`: the slot keeps directories of equal names
    /// apart (goose finds SKILL.md files at any depth), `dir` is the name we check against.
    slot: String,
    dir: String,
    /// Files of the skill: SKILL.md, or a whole corpus skill.
    source: Source,
    /// Names goose might register this skill under; no two skills of one batch share one,
    /// because goose keeps the first skill of a name in unsorted directory order.
    names: BTreeSet<String>,
}

enum Source {
    Content { file: &'static str, bytes: Vec<u8> },
    Directory(PathBuf),
}

/// What goose showed for one batch.
struct GooseView {
    /// `goose skills list`: location → (name, shown description).
    listed: BTreeMap<String, (String, String)>,
    /// The skills section of the system prompt of `goose run`.
    prompt_skills: String,
}

fn goose_bins() -> Vec<PathBuf> {
    let current = match std::env::var_os("GOOSE_BIN") {
        Some(bin) if !bin.is_empty() => PathBuf::from(bin),
        _ => panic!(
            "GOOSE_BIN is not set. Run `make test`, or set it to the goose binary: \
             GOOSE_BIN=\"$(hack/install-goose.sh | tail -n1)\" cargo test -p agentic-skill --features integration"
        ),
    };
    let mut bins = vec![current];
    match std::env::var_os("GOOSE_PREVIOUS_BIN") {
        Some(bin) if !bin.is_empty() => bins.push(PathBuf::from(bin)),
        _ => eprintln!("GOOSE_PREVIOUS_BIN is not set; checking the current goose only"),
    }
    bins
}

#[test]
fn goose_lists_every_skill_we_call_valid_as_we_read_it() {
    let skills = all_skills();
    let batches = batches(&skills);
    for bin in goose_bins() {
        let scratch = tempfile::tempdir().expect("scratch HOME");
        let version = run_goose(&bin, scratch.path(), &["--version"], &[])
            .trim()
            .to_owned();
        let started = Instant::now();
        let mut failures = Vec::new();
        let mut checked = 0;
        for batch in &batches {
            let (count, batch_failures) = check_batch(&bin, &skills, batch);
            checked += count;
            failures.extend(batch_failures);
        }
        eprintln!(
            "goose {version}: {} skills in {} batches, {checked} valid ones compared, in {:.1} s",
            skills.len(),
            batches.len(),
            started.elapsed().as_secs_f64()
        );
        assert!(
            failures.is_empty(),
            "goose {version}: {} disagreements:\n{}",
            failures.len(),
            failures.join("\n")
        );
        // The generated variants alone must give many valid skills, or the rule checks little.
        assert!(
            checked >= VARIANTS / 2,
            "only {checked} valid skills compared"
        );
    }
}

/// Lays out one batch, runs goose on it and checks every skill; returns how many valid
/// skills were compared and the disagreements.
fn check_batch(bin: &Path, skills: &[Skill], batch: &[usize]) -> (usize, Vec<String>) {
    let home = tempfile::tempdir().expect("scratch HOME");
    let root = home.path().join(".agents/skills");
    let mut dirs = Vec::new();
    for &index in batch {
        let skill = &skills[index];
        let dir = root.join(&skill.slot).join(&skill.dir);
        match &skill.source {
            Source::Content { file, bytes } => {
                std::fs::create_dir_all(&dir).expect("create skill dir");
                std::fs::write(dir.join(file), bytes).expect("write SKILL.md");
            }
            Source::Directory(from) => copy_tree(from, &dir),
        }
        dirs.push((index, dir));
    }
    let view = goose_view(bin, home.path());

    let mut failures = Vec::new();
    let mut compared = 0;
    for (index, dir) in dirs {
        let skill = &skills[index];
        let report = validate_path(&dir)
            .unwrap_or_else(|e| panic!("our validator failed on {}: {e}", dir.display()));
        let location = dir.display().to_string();
        let listed = view.listed.get(&location);
        let problem = if let Some(frontmatter) = &report.frontmatter {
            compared += 1;
            check_valid(
                listed,
                &view.prompt_skills,
                &frontmatter.name,
                &frontmatter.description,
            )
        } else {
            check_refused(&report, listed)
        };
        if let Some(problem) = problem {
            failures.push(format!("{}: {problem}", skill.label));
        }
    }
    (compared, failures)
}

/// A skill we call valid: listed where we laid it, under our name, with our description
/// (its visible part in the listing, all of it in the system prompt).
fn check_valid(
    listed: Option<&(String, String)>,
    prompt: &str,
    name: &str,
    description: &str,
) -> Option<String> {
    let Some((listed_name, shown)) = listed else {
        return Some(format!(
            "valid for us as {name:?}, but goose does not list it"
        ));
    };
    if listed_name != name {
        return Some(format!(
            "valid for us as {name:?}, goose lists it as {listed_name:?}"
        ));
    }
    let expected = listing_form(description);
    if *shown != expected {
        return Some(format!(
            "goose lists {name:?} with description {shown:?}; ours shows as {expected:?}"
        ));
    }
    // goose trims the frontmatter's end, so a block description written last loses its
    // final line break; that changes no word (see goose.rs in src).
    let wanted = description.trim_end();
    let marker = format!("\n• {name} - {wanted}");
    let whole = prompt.match_indices(&marker).any(|(at, _)| {
        let rest = prompt[at + marker.len()..].trim_start();
        rest.is_empty() || rest.starts_with("• ") || rest.starts_with("## ")
    });
    (!whole).then(|| {
        let seen = prompt
            .find(&format!("\n• {name} - "))
            .map(|at| prompt[at..].lines().nth(1).unwrap_or_default().to_owned());
        format!(
            "goose's system prompt does not carry {name:?} with our description {description:?}; it has {seen:?}"
        )
    })
}

/// A skill we refuse only because goose would not list it must indeed be missing there.
fn check_refused(report: &Report, listed: Option<&(String, String)>) -> Option<String> {
    let skipped = [
        FindingCode::GooseIndentedFrontmatter,
        FindingCode::GooseNameNull,
        FindingCode::GooseIntegerOutOfRange,
    ];
    let only_skipped = report.errors.iter().all(|f| skipped.contains(&f.code));
    (only_skipped && listed.is_some()).then(|| {
        format!(
            "we refuse it because goose would not list it ({}), but goose lists it as {listed:?}",
            report.summary()
        )
    })
}

/// The description as `goose skills list` shows it: white space runs as one space, and past
/// 50 characters the first 47 and `...`.
fn listing_form(description: &str) -> String {
    let flat = description.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 50 {
        format!("{}...", flat.chars().take(47).collect::<String>())
    } else {
        flat
    }
}

/// Runs `goose skills list` and `goose run` (against a fake endpoint) with `home` as HOME.
fn goose_view(bin: &Path, home: &Path) -> GooseView {
    let listing = run_goose(bin, home, &["skills", "list"], &[]);
    let mut listed = BTreeMap::new();
    for line in listing.lines().skip(1) {
        // name | description | description tokens | content tokens | location; only the
        // description may hold " | ".
        let mut tail = line.rsplitn(4, " | ");
        let (Some(location), Some(_), Some(_), Some(head)) =
            (tail.next(), tail.next(), tail.next(), tail.next())
        else {
            continue;
        };
        let Some((name, shown)) = head.split_once(" | ") else {
            continue;
        };
        listed.insert(
            location.trim().to_owned(),
            (name.trim().to_owned(), shown.trim_end().to_owned()),
        );
    }

    let endpoint = FakeEndpoint::start();
    let host = format!("http://{}", endpoint.address);
    run_goose(
        bin,
        home,
        &["run", "--no-session", "--text", "Say hello."],
        &[
            ("GOOSE_PROVIDER", "openai"),
            ("GOOSE_MODEL", "gpt-4o"),
            ("OPENAI_API_KEY", "not-a-key"),
            ("OPENAI_HOST", &host),
            ("GOOSE_DISABLE_KEYRING", "1"),
        ],
    );
    let requests = endpoint.stop();
    let marker = "You have these skills at your disposal";
    let prompt = requests
        .iter()
        .find_map(|body| {
            let request: serde_json::Value = serde_json::from_slice(body).ok()?;
            let system = request["messages"][0]["content"].as_str()?.to_owned();
            system.contains(marker).then_some(system)
        })
        .unwrap_or_else(|| {
            panic!(
                "no request to the fake endpoint carried goose's skills ({} requests)",
                requests.len()
            )
        });
    let start = prompt.find(marker).unwrap_or_default();
    let section = &prompt[start..];
    // The section runs to the next extension's heading.
    let end = section.find("\n## ").unwrap_or(section.len());
    GooseView {
        listed,
        prompt_skills: section[..end].to_owned(),
    }
}

/// Runs goose with `home` as HOME, in an empty working directory below it (goose reads the
/// working directory's skill folders first), with nothing from this process's environment
/// but PATH, and returns stdout.
fn run_goose(bin: &Path, home: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let work = home.join("work");
    std::fs::create_dir_all(&work).expect("create work dir");
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(&work)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + GOOSE_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for goose") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("goose {args:?} ran longer than {GOOSE_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().expect("stdout reader");
    let stderr = err.join().expect("stderr reader");
    assert!(
        status.success(),
        "goose {args:?} failed with {status}\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

/// A minimal OpenAI-compatible endpoint on 127.0.0.1: records each request body and answers
/// every chat completion with one streamed "ok".
struct FakeEndpoint {
    address: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl FakeEndpoint {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake endpoint");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let address = listener.local_addr().expect("its address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (requests, stop) = (requests.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if let Some(body) = answer(stream) {
                                requests.lock().expect("requests").push(body);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => panic!("fake endpoint accept: {e}"),
                    }
                }
            })
        };
        FakeEndpoint {
            address,
            requests,
            stop,
            thread,
        }
    }

    fn stop(self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("fake endpoint thread");
        std::mem::take(&mut *self.requests.lock().expect("requests"))
    }
}

/// Reads one HTTP/1.1 request and answers it; returns the body of a POST.
fn answer(stream: TcpStream) -> Option<Vec<u8>> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(GOOSE_TIMEOUT)).ok()?;
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let mut stream = reader.into_inner();
    if !request_line.starts_with("POST ") {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return None;
    }
    let chunk = serde_json::json!({
        "id": "fake", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    });
    let events = format!("data: {chunk}\n\ndata: [DONE]\n\n");
    let _ = stream.write_all(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{events}",
            events.len()
        )
        .as_bytes(),
    );
    Some(body)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read corpus skill") {
        let entry = entry.expect("corpus entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy corpus file");
        }
    }
}

/// Every skill to show goose: the skills-ref cases, the corpus, the seeded variants.
fn all_skills() -> Vec<Skill> {
    let mut skills = Vec::new();
    for (index, case) in generated_cases().into_iter().enumerate() {
        // The many cases named `x` are renamed, so a batch can hold them all.
        let (dir, content) = if case.dir == "x" {
            let unique = format!("x{index}");
            (unique.clone(), rename(&case.content, "x", &unique))
        } else {
            (case.dir.clone(), case.content.clone())
        };
        // The renaming must keep our verdict: the case's expectation still holds.
        let report = agentic_skill::validate_skill_md(&content, Some(&dir));
        let keeps = match case.expect {
            Expect::Valid | Expect::OnlyWeAccept(_) => report.is_valid(),
            Expect::Invalid(code)
            | Expect::ReferenceCrashes(code)
            | Expect::OnlyWeReject(code, _) => {
                code == FindingCode::SkillFileMissing
                    || code == FindingCode::FileTooLarge
                    || report.has(code)
            }
        };
        let deliberate = match case.expect {
            Expect::OnlyWeAccept(reason) | Expect::OnlyWeReject(_, reason) => reason,
            _ => "",
        };
        assert!(
            keeps,
            "case {:?} ({deliberate}) renamed to {dir}: {}",
            case.label,
            report.summary()
        );
        let mut names = name_candidates(&content);
        names.insert(dir.clone());
        skills.push(Skill {
            label: format!("case {:?}", case.label),
            slot: format!("case-{index}"),
            dir,
            source: Source::Content {
                file: case.file,
                bytes: content,
            },
            names,
        });
    }
    let corpus = corpus_dir();
    let mut directories = sample_skills();
    if corpus.is_dir() {
        directories.extend(corpus_skills(&corpus));
    } else {
        eprintln!("{} not found; no corpus skills", corpus.display());
    }
    for dir in directories {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut names = std::fs::read(dir.join("SKILL.md"))
            .map(|c| name_candidates(&c))
            .unwrap_or_default();
        names.insert(name.clone());
        skills.push(Skill {
            label: format!("skill {}", dir.display()),
            slot: format!("dir-{}", skills.len()),
            dir: name,
            source: Source::Directory(dir),
            names,
        });
    }
    let mut random = Seeded(0x5eed_9005_e5ed_0001);
    for index in 0..VARIANTS {
        let name = format!("v{index}");
        let content = variant(&mut random, &name);
        let mut names = name_candidates(&content);
        names.insert(name.clone());
        skills.push(Skill {
            label: format!("variant {index}: {:?}", String::from_utf8_lossy(&content)),
            slot: "variants".to_owned(),
            dir: name,
            source: Source::Content {
                file: "SKILL.md",
                bytes: content,
            },
            names,
        });
    }
    skills
}

/// The sample skills `make run` pushes (`config/samples/skills`, one or two levels down).
fn sample_skills() -> Vec<PathBuf> {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/samples/skills");
    let mut skills = Vec::new();
    let mut pending = vec![(samples, 0)];
    while let Some((dir, depth)) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the sample skills") {
            let path = entry.expect("sample entry").path();
            if path.join("SKILL.md").is_file() {
                skills.push(path);
            } else if path.is_dir() && depth == 0 {
                pending.push((path, depth + 1));
            }
        }
    }
    assert!(!skills.is_empty(), "no sample skills found");
    skills.sort();
    skills
}

/// Replaces the skill name `from` with `to` where it is the value of a `name` key.
fn rename(content: &[u8], from: &str, to: &str) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(content) else {
        return content.to_vec();
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let (before, after) = rest.split_at(at);
        let line_start = before.rfind(['\n', '\r']).map_or(0, |i| i + 1);
        let key = before[line_start..]
            .trim_end_matches([' ', '\'', '"'])
            .strip_suffix(':')
            .map(|k| k.trim_end_matches([' ', '\'', '"']));
        let ends_word = after[from.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'));
        out.push_str(before);
        if key.is_some_and(|k| k.ends_with("name")) && ends_word {
            out.push_str(to);
        } else {
            out.push_str(from);
        }
        rest = &after[from.len()..];
    }
    out.push_str(rest);
    out.into_bytes()
}

/// Every value written after a `name:` key, as goose might read it (quotes and blanks off).
fn name_candidates(content: &[u8]) -> BTreeSet<String> {
    String::from_utf8_lossy(content)
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim_matches([' ', '\'', '"', '-', '?', '\u{feff}'])
                .eq("name")
                .then(|| value.trim().trim_matches(['\'', '"']).to_owned())
        })
        .collect()
}

/// Groups skills into batches in which no two share a name goose might register.
fn batches(skills: &[Skill]) -> Vec<Vec<usize>> {
    let mut batches: Vec<(BTreeSet<String>, Vec<usize>)> = Vec::new();
    for (index, skill) in skills.iter().enumerate() {
        match batches
            .iter_mut()
            .find(|(names, _)| names.is_disjoint(&skill.names))
        {
            Some((names, members)) => {
                names.extend(skill.names.iter().cloned());
                members.push(index);
            }
            None => batches.push((skill.names.clone(), vec![index])),
        }
    }
    batches.into_iter().map(|(_, members)| members).collect()
}

/// A small deterministic generator (xorshift64*), so every run checks the same variants and
/// a failure names one that can be reproduced.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap_or(1)).unwrap_or(0)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Description texts: separators, indicators and type-like words, as plain text.
const TEXTS: &[&str] = &[
    "Fill PDF forms",
    "a - b",
    "a -- b",
    "a --- b",
    "a---b",
    "a # not a comment",
    "50% done",
    "uses `tick` marks",
    "yes",
    "no",
    "on",
    "true",
    "null",
    "~",
    "123",
    "-1",
    "0x1F",
    "0o17",
    "1e3",
    ".inf",
    "2001-12-14",
    "12:30:00",
    "99999999999999999999",
    "é and 🦀",
    "a, b; c",
    "key: value",
    "trailing colon:",
    "x | y",
    "- dash first",
    "? question",
    "@at",
    "*star",
    "&amp",
    "!bang",
    "{brace",
    "[bracket",
    "'quote",
    "\"double",
    "%percent",
    "<<",
    "=",
    "",
    " ",
];

/// Metadata values: integers at and past the 64-bit edges, floats, booleans and nulls.
const METADATA_VALUES: &[&str] = &[
    "1.0",
    "v1",
    "true",
    "null",
    "~",
    "",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "0xFFFFFFFFFFFFFFFF",
    "0x10000000000000000",
    "0b1",
    "0o777",
    "+1",
    "1_000",
    "0001",
    "1e400",
    "-.inf",
    ".nan",
    "340282366920938463463374607431768211455",
    "340282366920938463463374607431768211456",
    "-170141183460469231731687303715884105728",
    "-170141183460469231731687303715884105729",
    "a --- b",
];

/// A description value written in one of YAML's styles.
fn description_value(random: &mut Seeded, indent: &str) -> String {
    let text = random.pick(TEXTS);
    let second = random.pick(TEXTS);
    match random.below(9) {
        0 | 1 => text.to_owned(),
        2 => format!("'{}'", text.replace('\'', "''")),
        3 => format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\"")),
        4 => format!("|\n{indent}  {text}\n{indent}  {second}"),
        5 => format!("|-\n{indent}  {text}\n{indent}  ---\n{indent}  {second}"),
        6 => format!(">\n{indent}  {text}\n\n{indent}  {second}"),
        7 => format!("{text}\n{indent}  {second}"),
        _ => format!("\"{text}\\t\\u00e9\\x41\""),
    }
}

/// One frontmatter variant for a skill named `name`.
fn variant(random: &mut Seeded, name: &str) -> Vec<u8> {
    let indent = if random.chance(5) { "  " } else { "" };
    let name_line = match random.below(5) {
        0 => format!("name: '{name}'"),
        1 => format!("name: \"{name}\""),
        2 => format!("name : {name}"),
        _ => format!("name: {name}"),
    };
    let mut fields = vec![
        name_line,
        format!("description: {}", description_value(random, indent)),
    ];
    if random.chance(30) {
        fields.push(format!("license: {}", random.pick(TEXTS)));
    }
    if random.chance(20) {
        fields.push(format!("compatibility: {}", random.pick(TEXTS)));
    }
    if random.chance(10) {
        fields.push(format!("allowed-tools: {}", random.pick(TEXTS)));
    }
    if random.chance(35) {
        let nested = if random.chance(50) { "  " } else { "    " };
        let mut metadata = "metadata:".to_owned();
        for key in 0..=random.below(3) {
            let value = random.pick(METADATA_VALUES);
            let value = if random.chance(20) {
                format!("'{value}'")
            } else {
                value.to_owned()
            };
            metadata.push_str(&format!("\n{indent}{nested}k{key}: {value}"));
        }
        fields.push(metadata);
    }
    if random.chance(5) {
        fields.push("version: 1".to_owned());
    }
    if random.chance(50) {
        fields.swap(0, 1);
    }
    let mut lines = Vec::new();
    if random.chance(10) {
        lines.push(String::new());
    }
    for field in fields {
        if random.chance(10) {
            lines.push(format!("{indent}# {}", random.pick(TEXTS)));
        }
        let mut field = format!("{indent}{field}");
        if random.chance(10) && !field.contains('\n') {
            field.push_str(" # trailing comment");
        }
        lines.push(field);
    }
    let newline = if random.chance(10) { "\r\n" } else { "\n" };
    let bom = if random.chance(5) { "\u{feff}" } else { "" };
    let opening = if random.chance(5) { "--- " } else { "---" };
    let frontmatter = lines.join("\n");
    format!("{bom}{opening}\n{frontmatter}\n---\n# Instructions\n\nDo the thing.\n")
        .replace('\n', newline)
        .into_bytes()
}
