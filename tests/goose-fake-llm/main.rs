//! A scripted OpenAI-compatible chat endpoint for one `goose run`, inside the goose test
//! image (`hack/goose-harness`): it listens on 127.0.0.1, runs the command after `--` with
//! `OPENAI_HOST` pointing at itself, answers each chat completion by the script below, appends
//! every request it gets to the record file as one JSON line, and exits with the command's
//! exit code.
//!
//! The script, by what goose asks:
//! 1. a request without tools (goose naming the session): a title;
//! 2. a request with tools after fewer tool results than `LOAD` arguments: a call of
//!    `load_skill` with the next `LOAD` as its `name` (a skill, or `<skill>/<path>` for one
//!    of its supporting files);
//! 3. a request with tools after one tool result per `LOAD`: a final answer, which ends
//!    `goose run`.
//!
//! Answers are streamed as server-sent events when the request asks for it (`"stream": true`,
//! what goose's OpenAI provider does), else returned as one JSON object. Only what goose sends
//! is understood: HTTP/1.1 with a `Content-Length` body, one request per connection.
//!
//! ```text
//! goose-fake-llm RECORD_FILE LOAD... -- COMMAND [ARG]...
//! goose-fake-llm --serve ADDRESS RELEASE_FILE RECORD_FILE LOAD...
//! ```
//!
//! With `--serve` it runs no command: it listens on ADDRESS (a goose elsewhere reaches it,
//! `tests/tests/credential_proxy_node.rs`), prints `listening <address>` once bound, holds its
//! answer to the first request with tools until RELEASE_FILE exists (so a test can change
//! something mid-run), and serves until it is killed. Each record also carries the request's
//! `authorization` header, to show which key reached the endpoint.

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// goose's tool that loads a skill by name (its `skills` platform extension).
const LOAD_SKILL_TOOL: &str = "load_skill";
/// The model name every answer reports.
const MODEL: &str = "fake-model";
/// The largest request body read; goose's requests (system prompt, tools, a skill) are far
/// smaller, and the bound keeps a runaway client from filling the container's memory.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The largest request head (request line and headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The title answered to goose's request for a session name.
const TITLE: &str = "Skills check";
/// The final answer, after the tool result.
const FINAL_ANSWER: &str = "The skill is loaded; nothing else to do.";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("goose-fake-llm: {error}");
            ExitCode::from(1)
        }
    }
}

/// Where a served script holds its first turn with tools: until this file exists.
type Hold = Option<(std::path::PathBuf, std::sync::atomic::AtomicBool)>;

/// `--serve`: the script on ADDRESS, for a goose elsewhere, until killed.
fn serve_forever(args: &[String]) -> Result<ExitCode, String> {
    let usage = "usage: goose-fake-llm --serve ADDRESS RELEASE_FILE RECORD_FILE LOAD...";
    let [address, release, record, loads @ ..] = args else {
        return Err(usage.to_owned());
    };
    if loads.is_empty() {
        return Err(usage.to_owned());
    }
    let record = open_record(record)?;
    let listener = TcpListener::bind(address.as_str())
        .map_err(|error| format!("listening on {address}: {error}"))?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("reading the listening address: {error}"))?;
    println!("listening {bound}");
    std::io::stdout()
        .flush()
        .map_err(|error| format!("writing the address: {error}"))?;
    let hold: Arc<Hold> = Arc::new(Some((
        release.into(),
        std::sync::atomic::AtomicBool::new(false),
    )));
    accept(
        &listener,
        &Arc::new(Mutex::new(record)),
        &loads.into(),
        &hold,
    );
    Ok(ExitCode::SUCCESS)
}

fn open_record(path: &str) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| format!("opening the record file {path}: {error}"))
}

/// Serves each connection on a thread of its own, for as long as the listener accepts.
fn accept(
    listener: &TcpListener,
    record: &Arc<Mutex<File>>,
    loads: &Arc<[String]>,
    hold: &Arc<Hold>,
) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let (record, loads, hold) = (record.clone(), loads.clone(), hold.clone());
        std::thread::spawn(move || {
            if let Err(error) = serve(stream, &record, &loads, &hold) {
                eprintln!("goose-fake-llm: {error}");
            }
        });
    }
}

fn run(args: Vec<String>) -> Result<ExitCode, String> {
    if args.first().map(String::as_str) == Some("--serve") {
        return serve_forever(&args[1..]);
    }
    let usage = "usage: goose-fake-llm RECORD_FILE LOAD... -- COMMAND [ARG]...";
    let Some(separator) = args.iter().position(|arg| arg == "--") else {
        return Err(usage.to_owned());
    };
    let (script, command) = (&args[..separator], &args[separator + 1..]);
    let [record, loads @ ..] = script else {
        return Err(usage.to_owned());
    };
    if loads.is_empty() || command.is_empty() {
        return Err(usage.to_owned());
    }
    let record = open_record(record)?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|error| format!("listening on 127.0.0.1: {error}"))?;
    let address = listener
        .local_addr()
        .map_err(|error| format!("reading the listening address: {error}"))?;

    let record = Arc::new(Mutex::new(record));
    let loads: Arc<[String]> = loads.into();
    std::thread::spawn(move || accept(&listener, &record, &loads, &Arc::new(None)));

    let status = Command::new(&command[0])
        .args(&command[1..])
        .env("OPENAI_HOST", format!("http://{address}"))
        .status()
        .map_err(|error| format!("running {}: {error}", command[0]))?;
    // A command killed by a signal has no code; 128 + signal is what a shell reports.
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt as _;
        128 + status.signal().unwrap_or(0)
    });
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// Reads one request, records it and answers it.
fn serve(
    stream: TcpStream,
    record: &Mutex<File>,
    loads: &[String],
    hold: &Hold,
) -> Result<(), String> {
    let mut reader = BufReader::new(
        stream
            .try_clone()
            .map_err(|error| format!("cloning a connection: {error}"))?,
    );
    let (method, path, length, authorization) = read_head(&mut reader)?;
    if length > MAX_BODY_BYTES {
        return respond(
            stream,
            "413 Payload Too Large",
            "text/plain",
            &format!("a body of {length} bytes is over the {MAX_BODY_BYTES}-byte limit"),
        );
    }
    let mut body = vec![0; length];
    reader
        .read_exact(&mut body)
        .map_err(|error| format!("reading the body of {method} {path}: {error}"))?;
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .map_err(|error| format!("the body of {method} {path} is not JSON: {error}"))?
    };
    {
        let mut file = record
            .lock()
            .map_err(|_| "the record file's lock is poisoned".to_owned())?;
        let line = json!({
            "method": method,
            "path": path,
            "authorization": authorization,
            "body": body,
        });
        writeln!(file, "{line}").map_err(|error| format!("writing the record: {error}"))?;
    }

    let path_only = path.split('?').next().unwrap_or_default();
    if method == "GET" && path_only.ends_with("/models") {
        let models = json!({ "object": "list", "data": [{ "id": MODEL, "object": "model" }] });
        return respond(stream, "200 OK", "application/json", &models.to_string());
    }
    if method != "POST" || !path.ends_with("/chat/completions") {
        return respond(
            stream,
            "404 Not Found",
            "text/plain",
            &format!("no {method} {path} here"),
        );
    }
    if let Some((release, held)) = hold
        && body.get("tools").is_some()
        && !held.swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        while !release.exists() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    let answer = answer(&body, loads);
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        respond(stream, "200 OK", "text/event-stream", &events(&answer))
    } else {
        respond(
            stream,
            "200 OK",
            "application/json",
            &completion(&answer).to_string(),
        )
    }
}

/// The request line's method and path, the body's length and the `authorization` header,
/// from the request head.
fn read_head(
    reader: &mut BufReader<TcpStream>,
) -> Result<(String, String, usize, Option<String>), String> {
    let mut head = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .map_err(|error| format!("reading a request head: {error}"))?;
        if read == 0 {
            return Err("the connection closed inside a request head".to_owned());
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        head.push(line.trim_end().to_owned());
        if head.iter().map(String::len).sum::<usize>() > MAX_HEAD_BYTES {
            return Err(format!(
                "a request head is over the {MAX_HEAD_BYTES}-byte limit"
            ));
        }
    }
    let request = head.first().ok_or("an empty request head")?;
    let mut parts = request.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(format!(
            "a request line without method and path: {request:?}"
        ));
    };
    let mut length = 0;
    let mut authorization = None;
    for header in &head[1..] {
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("content-length") {
            length = value
                .trim()
                .parse()
                .map_err(|_| format!("a Content-Length that is not a number: {value:?}"))?;
        } else if name.eq_ignore_ascii_case("authorization") {
            authorization = Some(value.trim().to_owned());
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(format!(
                "{method} {path} has Transfer-Encoding {}; only Content-Length bodies are read",
                value.trim()
            ));
        }
    }
    Ok((method.to_owned(), path.to_owned(), length, authorization))
}

/// What the assistant says next.
#[derive(Debug, PartialEq)]
enum Answer {
    Text(&'static str),
    /// A `load_skill` call with this `name`, the `call`-th of the conversation (its id).
    LoadSkill {
        name: String,
        call: usize,
    },
}

fn answer(request: &Value, loads: &[String]) -> Answer {
    let has_tools = request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty());
    let tool_results = request
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| {
            messages
                .iter()
                .filter(|message| message.get("role").and_then(Value::as_str) == Some("tool"))
                .count()
        });
    if !has_tools {
        return Answer::Text(TITLE);
    }
    match loads.get(tool_results) {
        Some(load) => Answer::LoadSkill {
            name: load.clone(),
            call: tool_results,
        },
        None => Answer::Text(FINAL_ANSWER),
    }
}

/// The assistant message and finish reason of `answer`.
fn message(answer: &Answer) -> (Value, &'static str) {
    match answer {
        Answer::Text(text) => (json!({ "role": "assistant", "content": text }), "stop"),
        Answer::LoadSkill { name, call } => (
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "index": 0,
                    "id": format!("call_{call}"),
                    "type": "function",
                    "function": {
                        "name": LOAD_SKILL_TOOL,
                        "arguments": json!({ "name": name }).to_string(),
                    },
                }],
            }),
            "tool_calls",
        ),
    }
}

fn usage() -> Value {
    json!({ "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 })
}

/// A non-streamed chat completion.
fn completion(answer: &Answer) -> Value {
    let (message, finish_reason) = message(answer);
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason }],
        "usage": usage(),
    })
}

/// A streamed chat completion: the whole message in one delta, then the finish reason with
/// the usage, then `[DONE]`.
fn events(answer: &Answer) -> String {
    let (message, finish_reason) = message(answer);
    let chunk = |choice: Value, usage: Value| {
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [choice],
            "usage": usage,
        })
    };
    let delta = chunk(
        json!({ "index": 0, "delta": message, "finish_reason": null }),
        Value::Null,
    );
    let finish = chunk(
        json!({ "index": 0, "delta": {}, "finish_reason": finish_reason }),
        usage(),
    );
    format!("data: {delta}\n\ndata: {finish}\n\ndata: [DONE]\n\n")
}

/// Writes a whole response and closes the connection, which ends the body.
fn respond(
    mut stream: TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> Result<(), String> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n{body}"
    )
    .and_then(|()| stream.flush())
    .map_err(|error| format!("writing a response: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_titles_loads_each_name_in_turn_then_answers() {
        let loads = ["java".to_owned(), "java/references/apis.md".to_owned()];
        let title = json!({ "messages": [{ "role": "user", "content": "hi" }] });
        assert_eq!(answer(&title, &loads), Answer::Text(TITLE));
        let tools = json!([{ "type": "function", "function": { "name": LOAD_SKILL_TOOL } }]);
        let mut messages = vec![json!({ "role": "user", "content": "go" })];
        for (call, load) in loads.iter().enumerate() {
            let request = json!({ "tools": tools, "messages": messages });
            assert_eq!(
                answer(&request, &loads),
                Answer::LoadSkill {
                    name: load.clone(),
                    call
                }
            );
            messages.push(json!({ "role": "tool", "tool_call_id": format!("call_{call}") }));
        }
        let done = json!({ "tools": tools, "messages": messages });
        assert_eq!(answer(&done, &loads), Answer::Text(FINAL_ANSWER));
    }

    #[test]
    fn a_streamed_tool_call_carries_its_arguments_as_json_text() {
        let stream = events(&Answer::LoadSkill {
            name: "java".into(),
            call: 0,
        });
        let chunks: Vec<Value> = stream
            .split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).expect("each event is JSON"))
            .collect();
        assert_eq!(chunks.len(), 2);
        let call = &chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"];
        assert_eq!(call["name"], LOAD_SKILL_TOOL);
        let arguments: Value =
            serde_json::from_str(call["arguments"].as_str().expect("text")).expect("JSON");
        assert_eq!(arguments, json!({ "name": "java" }));
        assert_eq!(chunks[1]["choices"][0]["finish_reason"], "tool_calls");
        assert!(stream.ends_with("data: [DONE]\n\n"));
    }
}
