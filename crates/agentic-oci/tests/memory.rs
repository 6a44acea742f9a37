//! The memory of reading an image stays within `Limits::memory_bound`, whatever the number and
//! length of its entries, and comes back after each read. Hostile images pushed to a real
//! registry are read whole, by `subPath` and listed for a collection, while a global allocator
//! counts the live heap bytes of this process and their peak: the images of issue #28 once
//! per reader (a read of the wide one takes about 10 s in a debug build), a smaller image of
//! the same shape ten times per reader, to show that nothing stays from one read to the next.
//!
//! One test only: the counter sees every thread of the process, so nothing may run beside it.

// Test code: a failed expectation panics, and that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::Write;
use std::time::Instant;

use agentic_oci::{
    Limits, MAX_LISTED_DIRECTORIES, OciError, PackedImage, RegistryAuth, RegistryClient,
    RegistryOptions, ResolvedImage, SkillContent, SkillListing, push_image,
};
use agentic_testenv::Registry;
use flate2::Compression;
use flate2::write::GzEncoder;
use peak_alloc::PeakAlloc;
use sha2::{Digest as _, Sha256};
use support::one_layer_image;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

const ANONYMOUS: RegistryAuth = RegistryAuth::Anonymous;

/// How often the reads of the small image are repeated to show that memory does not grow.
const REPETITIONS: usize = 10;

/// What may stay from one read to the next besides what the first read left: the HTTP
/// client's pooled connection keeps its read buffer, which hyper grows to at most 8 KiB plus
/// 400 KiB, and a new connection may replace it between reads. A read that kept its top-level
/// records and names would leave about 250 KiB of the small image each time: 2 MiB over ten.
const GROWTH_SLACK: usize = 8 * 1024 + 400 * 1024;

/// Hashes the uncompressed tar on its way into the gzip encoder (the config's diff_id).
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.hasher.update(&buf[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A one-layer image whose tar is written by `fill`, compressed as it is written: the test
/// never holds the uncompressed layer.
fn streamed_image(
    fill: impl FnOnce(&mut tar::Builder<Hashing<GzEncoder<Vec<u8>>>>),
) -> PackedImage {
    let mut builder = tar::Builder::new(Hashing {
        inner: GzEncoder::new(Vec::new(), Compression::fast()),
        hasher: Sha256::new(),
    });
    fill(&mut builder);
    let hashing = builder.into_inner().unwrap();
    let diff_id = format!("sha256:{}", hex::encode(hashing.hasher.finalize()));
    let layer = hashing.inner.finish().unwrap();
    one_layer_image(layer, diff_id)
}

fn append_dir(builder: &mut tar::Builder<impl Write>, path: &str) {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_mode(0o755);
    header.set_size(0);
    builder
        .append_data(&mut header, format!("{path}/"), std::io::empty())
        .unwrap();
}

fn append_file(builder: &mut tar::Builder<impl Write>, path: &str, content: &[u8]) {
    let mut header = tar::Header::new_gnu();
    header.set_mode(0o644);
    header.set_size(content.len() as u64);
    builder.append_data(&mut header, path, content).unwrap();
}

fn skill_md(name: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n").into_bytes()
}

/// Top-level directories with 4,000-byte names (GNU long names), every `skill_every`-th
/// holding a `SKILL.md`, and one valid skill, `alpha`. The skill directories are implied by
/// their `SKILL.md` and the directory entries carry no content, so that as many directories
/// as possible fit `Limits::max_entries` and `Limits::max_uncompressed_bytes`.
struct Wide {
    directories: usize,
    skill_every: usize,
}

const NAME_BYTES: usize = 4_000;

impl Wide {
    /// Issue #28's: 50,000 directories, 244 MiB of tar, just under both limits.
    const HOSTILE: Wide = Wide {
        directories: 50_000,
        skill_every: 250,
    };
    /// The same shape, small enough to read ten times per reader.
    const SMALL: Wide = Wide {
        directories: 2_000,
        skill_every: 50,
    };

    fn skills(&self) -> usize {
        (self.directories - 1).div_ceil(self.skill_every) + 1
    }

    fn name(index: usize) -> String {
        format!("{index:05}{}", "w".repeat(NAME_BYTES - 5))
    }

    fn image(&self) -> PackedImage {
        streamed_image(|builder| {
            for index in 0..self.directories - 1 {
                let name = Wide::name(index);
                if index % self.skill_every == 0 {
                    append_file(builder, &format!("{name}/SKILL.md"), b"---\n");
                } else {
                    append_dir(builder, &name);
                }
            }
            append_file(builder, "alpha/SKILL.md", &skill_md("alpha"));
        })
    }

    fn check_whole(&self, verdict: &Result<SkillContent, OciError>) {
        match verdict {
            Err(OciError::SubPathRequired { directories, total }) => {
                assert_eq!(*total, self.skills());
                assert_eq!(directories.len(), MAX_LISTED_DIRECTORIES);
                assert_eq!(directories[1], Wide::name(self.skill_every));
            }
            other => panic!("expected SubPathRequired, got {other:?}"),
        }
    }

    fn check_sub_path(&self, verdict: &Result<SkillContent, OciError>) {
        let skill = verdict.as_ref().expect("alpha is a valid skill");
        assert_eq!(skill.path, "alpha/SKILL.md");
        assert_eq!(skill.skill_dir_count, self.skills());
    }

    fn check_listed(&self, verdict: &Result<SkillListing, OciError>) {
        let listing = verdict.as_ref().expect("the skills fit a collection");
        assert_eq!(listing.directories.len(), self.skills());
        assert_eq!(
            listing.directories.last().map(String::as_str),
            Some("alpha")
        );
    }
}

/// Issue #28's other image: 49,000 top-level skill directories, each a valid skill.
const DEEP_SKILLS: usize = 49_000;

fn deep_name(index: usize) -> String {
    format!("skill-{index:05}")
}

fn deep_image() -> PackedImage {
    streamed_image(|builder| {
        for index in 0..DEEP_SKILLS {
            let name = deep_name(index);
            append_dir(builder, &name);
            append_file(builder, &format!("{name}/SKILL.md"), &skill_md(&name));
        }
    })
}

/// Peak live bytes of each of `repetitions` reads, and live bytes left after each, both above
/// what was live before the first; every verdict passes `check`.
async fn measure<T>(
    what: &str,
    repetitions: usize,
    mut read: impl AsyncFnMut() -> T,
    check: impl Fn(&T),
) -> (Vec<usize>, Vec<usize>) {
    let baseline = HEAP.current_usage();
    let (mut peaks, mut retained) = (Vec::new(), Vec::new());
    for _ in 0..repetitions {
        let started = Instant::now();
        HEAP.reset_peak_usage();
        let verdict = read().await;
        let peak = HEAP.peak_usage().saturating_sub(baseline);
        check(&verdict);
        drop(verdict);
        let left = HEAP.current_usage().saturating_sub(baseline);
        eprintln!(
            "{what}: peak {} KiB, left {} KiB, {:.1} s",
            peak / 1024,
            left / 1024,
            started.elapsed().as_secs_f64()
        );
        peaks.push(peak);
        retained.push(left);
    }
    (peaks, retained)
}

async fn push(image: PackedImage, name: &str, addr: &str, opts: &RegistryOptions) -> ResolvedImage {
    let pushed = push_image(
        &image,
        &format!("{addr}/hostile/{name}:1"),
        &ANONYMOUS,
        opts,
    )
    .await
    .unwrap();
    eprintln!("{name}: {} bytes compressed", image.layer.len());
    ResolvedImage::from_pinned(&pushed).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_hostile_images_keeps_memory_bounded_and_gives_it_back() {
    let registry = Registry::start().await.unwrap();
    let addr = registry.addr();
    let opts = RegistryOptions {
        insecure_registries: vec![addr.clone()],
        // A debug build decodes the wide image's 244 MiB in 10 to 25 s on a busy 2-core
        // machine; the operator's 60 s deadline is for release builds. The bound is on memory.
        fetch_timeout: std::time::Duration::from_secs(600),
        ..RegistryOptions::default()
    };
    let bound = usize::try_from(Limits::default().memory_bound()).unwrap();
    // One client for every read, as the operator has.
    let client = RegistryClient::new(opts.clone()).unwrap();
    let wide = push(Wide::HOSTILE.image(), "wide", &addr, &opts).await;
    let deep = push(deep_image(), "deep", &addr, &opts).await;
    let small = push(Wide::SMALL.image(), "small", &addr, &opts).await;

    let mut peaks = Vec::new();
    let (wide_whole, _) = measure(
        "wide, whole",
        1,
        async || client.fetch_skill(&wide, None, &ANONYMOUS).await,
        |verdict| Wide::HOSTILE.check_whole(verdict),
    )
    .await;
    let (wide_listed, _) = measure(
        "wide, listed",
        1,
        async || client.list_skills(&wide, &ANONYMOUS).await,
        |verdict| Wide::HOSTILE.check_listed(verdict),
    )
    .await;
    let (deep_whole, _) = measure(
        "deep, whole",
        1,
        async || client.fetch_skill(&deep, None, &ANONYMOUS).await,
        |verdict| match verdict {
            Err(OciError::SubPathRequired { directories, total }) => {
                assert_eq!(*total, DEEP_SKILLS);
                assert_eq!(directories[0], deep_name(0));
            }
            other => panic!("expected SubPathRequired, got {other:?}"),
        },
    )
    .await;
    let (deep_sub_path, _) = measure(
        "deep, subPath",
        1,
        async || {
            client
                .fetch_skill(&deep, Some(&deep_name(4242)), &ANONYMOUS)
                .await
        },
        |verdict| {
            let skill = verdict.as_ref().expect("a valid skill");
            assert_eq!(skill.skill_dir_count, DEEP_SKILLS);
        },
    )
    .await;
    let (deep_listed, _) = measure(
        "deep, listed",
        1,
        async || client.list_skills(&deep, &ANONYMOUS).await,
        |verdict| {
            assert_eq!(
                verdict.as_ref().unwrap_err(),
                &OciError::TooManySkills {
                    count: DEEP_SKILLS,
                    max: Limits::default().max_skills,
                }
            );
        },
    )
    .await;
    peaks.extend(
        [
            wide_whole,
            wide_listed,
            deep_whole,
            deep_sub_path,
            deep_listed,
        ]
        .concat(),
    );

    let mut repeated = Vec::new();
    repeated.push(
        measure(
            "small, whole",
            REPETITIONS,
            async || client.fetch_skill(&small, None, &ANONYMOUS).await,
            |verdict| Wide::SMALL.check_whole(verdict),
        )
        .await,
    );
    repeated.push(
        measure(
            "small, subPath",
            REPETITIONS,
            async || client.fetch_skill(&small, Some("alpha"), &ANONYMOUS).await,
            |verdict| Wide::SMALL.check_sub_path(verdict),
        )
        .await,
    );
    repeated.push(
        measure(
            "small, listed",
            REPETITIONS,
            async || client.list_skills(&small, &ANONYMOUS).await,
            |verdict| Wide::SMALL.check_listed(verdict),
        )
        .await,
    );

    for (read_peaks, retained) in &repeated {
        peaks.extend(read_peaks);
        let (least, most) = (
            retained.iter().min().unwrap_or(&0),
            retained.iter().max().unwrap_or(&0),
        );
        assert!(
            most - least <= GROWTH_SLACK,
            "memory grew from read to read: {retained:?}"
        );
    }
    for peak in peaks {
        assert!(
            peak < bound,
            "a read peaked at {peak} bytes, over Limits::memory_bound() = {bound}"
        );
    }
}
