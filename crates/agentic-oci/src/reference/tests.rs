use super::*;

const HEX64: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Registry, repository, tag, digest.
type Parts<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>);

fn parts(reference: &Reference) -> Parts<'_> {
    (
        reference.registry(),
        reference.repository(),
        reference.tag(),
        reference.digest(),
    )
}

#[test]
fn normalizes_as_docker_does() {
    let digest = format!("sha256:{HEX64}");
    let cases: [(&str, Parts); 9] = [
        (
            "busybox",
            ("docker.io", "library/busybox", Some("latest"), None),
        ),
        (
            "test.com:tag",
            ("docker.io", "library/test.com", Some("tag"), None),
        ),
        (
            "test.com:5000",
            ("docker.io", "library/test.com", Some("5000"), None),
        ),
        ("test.com/repo:tag", ("test.com", "repo", Some("tag"), None)),
        ("localhost/a/b", ("localhost", "a/b", Some("latest"), None)),
        (
            "localhost:5000/skills/x:1.0",
            ("localhost:5000", "skills/x", Some("1.0"), None),
        ),
        (
            "index.docker.io/foo",
            ("docker.io", "library/foo", Some("latest"), None),
        ),
        ("foo/bar", ("docker.io", "foo/bar", Some("latest"), None)),
        (
            "Registry.Example-1.com/a__b/c--d.e_f",
            (
                "Registry.Example-1.com",
                "a__b/c--d.e_f",
                Some("latest"),
                None,
            ),
        ),
    ];
    for (input, expected) in cases {
        let parsed = parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(parts(&parsed), expected, "{input}");
    }
    let pinned = parse(&format!("r.io/x@{digest}")).unwrap();
    assert_eq!(parts(&pinned), ("r.io", "x", None, Some(digest.as_str())));
    let both = parse(&format!("r.io/x:v1@{digest}")).unwrap();
    assert_eq!(
        parts(&both),
        ("r.io", "x", Some("v1"), Some(digest.as_str()))
    );
}

#[test]
fn a_refusal_names_the_part_that_is_wrong() {
    let long_tag = format!("r.io/x:{}", "a".repeat(129));
    let long_path = format!("r.io/{}", "a".repeat(256));
    let cases = [
        ("", "empty"),
        (":v1", "repository name is empty"),
        ("r.io/Upper", "\"Upper\""),
        ("r.io/a//b", "empty component"),
        ("r.io/a/", "empty component"),
        ("-bad.io/x", "neither a registry host"),
        ("r.io/x:.v1", "the tag \".v1\""),
        ("r.io/x:ü", "the tag \"ü\""),
        (
            long_tag.as_str(),
            "129 characters long, over the limit of 128",
        ),
        (
            long_path.as_str(),
            "256 characters long, over the limit of 255",
        ),
        ("r.io/x@sha256:abc", "not algorithm:hex"),
        (
            "r.io/x@md5:0123456789abcdef0123456789abcdef",
            "\"md5\" is not sha256",
        ),
        (
            "r.io/x@sha512:0123456789abcdef0123456789abcdef",
            "has 128 hex digits, this one 32",
        ),
    ];
    for (input, expected) in cases {
        let error = parse(input).expect_err(input);
        assert!(error.contains(expected), "{input}: {error}");
    }
    // The longest tag and path are taken.
    parse(&format!("r.io/x:{}", "a".repeat(128))).unwrap();
    parse(&format!("r.io/{}", "a".repeat(255))).unwrap();
}

/// The same verdict and the same parts as oci-client's regular expression, over every
/// combination of hosts, paths, tags and digests below, good and bad; only non-ASCII tags
/// differ (refused here).
#[test]
fn agrees_with_oci_clients_parser() {
    let hosts = [
        "",
        "localhost",
        "localhost:5000",
        "example.com",
        "Example.COM:443",
        "a-b.c",
        "-bad.com",
        "bad-.com",
        "foo",
        "127.0.0.1:5000",
        "x:",
        "a..b",
        "a_b.com",
    ];
    let paths = [
        "repo",
        "a/b",
        "a__b",
        "a___b",
        "a--b",
        "a-",
        "a.b",
        "a..b",
        "A",
        "a_",
        "_a",
        "",
        "a//b",
        "a/",
        "a.b_c-d/e",
        "0",
    ];
    let long = "a".repeat(128);
    let too_long = "a".repeat(129);
    let tags = [
        String::new(),
        ":".into(),
        ":v1".into(),
        ":_x".into(),
        ":.x".into(),
        ":-x".into(),
        ":X.y-z_W".into(),
        format!(":{long}"),
        format!(":{too_long}"),
        ":a/b".into(),
    ];
    let digests = [
        String::new(),
        "@".into(),
        format!("@sha256:{HEX64}"),
        format!("@sha256:{}", &HEX64[1..]),
        format!("@sha256:{}", HEX64.to_uppercase()),
        format!("@sha384:{HEX64}{}", &HEX64[..32]),
        format!("@sha512:{HEX64}{HEX64}"),
        format!("@md5:{}", &HEX64[..32]),
        format!("@sha256+b64u:{HEX64}"),
        format!("@sha256:{}", "g".repeat(64)),
        format!("@1sha:{HEX64}"),
        format!("@sha256{HEX64}"),
    ];
    let mut compared = 0;
    for host in hosts {
        for path in paths {
            let name = if host.is_empty() {
                path.to_string()
            } else {
                format!("{host}/{path}")
            };
            for tag in &tags {
                for digest in &digests {
                    let input = format!("{name}{tag}{digest}");
                    let ours = parse(&input);
                    let theirs = input.parse::<Reference>();
                    match (&ours, &theirs) {
                        (Ok(a), Ok(b)) => assert_eq!(parts(a), parts(b), "{input}"),
                        (Err(_), Err(_)) => {}
                        _ => panic!("{input}: ours {ours:?}, oci-client's {theirs:?}"),
                    }
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(
        compared,
        hosts.len() * paths.len() * tags.len() * digests.len()
    );
    assert!("r.io/x:ü".parse::<Reference>().is_ok());
}
