//! A request body to an `ExportTraceServiceRequest`, as OTLP/HTTP defines it.

use std::io::Read;

use flate2::read::GzDecoder;
use prost::Message;

use crate::ExportTraceServiceRequest;

/// How a body is encoded, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf`: the binary protobuf encoding.
    Protobuf,
    /// `application/json`: the OTLP JSON mapping (hex trace and span ids, camelCase names).
    Json,
}

impl Encoding {
    /// The encoding a `Content-Type` names (parameters such as `charset` ignored), `None` for
    /// any other type.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media_type = content_type.split(';').next().unwrap_or_default().trim();
        if media_type.eq_ignore_ascii_case("application/x-protobuf") {
            Some(Self::Protobuf)
        } else if media_type.eq_ignore_ascii_case("application/json") {
            Some(Self::Json)
        } else {
            None
        }
    }
}

/// Why a body is not a trace request.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("Content-Encoding {0:?} is not supported (send identity or gzip)")]
    UnsupportedContentEncoding(String),
    #[error("the decompressed body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the gzip body is not valid: {0}")]
    Gzip(std::io::Error),
    #[error("the body is not an OTLP protobuf ExportTraceServiceRequest: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error("the body is not an OTLP JSON ExportTraceServiceRequest: {0}")]
    Json(#[from] serde_json::Error),
}

/// Decodes `body` (compressed as `content_encoding` says: none, `identity` or `gzip`) as
/// `encoding`. A gzip body may decompress to at most `max_decoded` bytes, so a small body
/// cannot make the receiver allocate without bound.
pub fn decode(
    body: &[u8],
    encoding: Encoding,
    content_encoding: Option<&str>,
    max_decoded: usize,
) -> Result<ExportTraceServiceRequest, DecodeError> {
    let inflated;
    let bytes = match content_encoding.map(str::trim) {
        None | Some("") => body,
        Some(identity) if identity.eq_ignore_ascii_case("identity") => body,
        Some(gzip) if gzip.eq_ignore_ascii_case("gzip") => {
            inflated = gunzip(body, max_decoded)?;
            &inflated[..]
        }
        Some(other) => return Err(DecodeError::UnsupportedContentEncoding(other.to_owned())),
    };
    if bytes.len() > max_decoded {
        return Err(DecodeError::TooLarge { limit: max_decoded });
    }
    Ok(match encoding {
        Encoding::Protobuf => ExportTraceServiceRequest::decode(bytes)?,
        Encoding::Json => serde_json::from_slice(bytes)?,
    })
}

fn gunzip(body: &[u8], max_decoded: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    // One byte past the limit tells "exactly at the limit" from "over it".
    let limit = u64::try_from(max_decoded)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    GzDecoder::new(body)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(DecodeError::Gzip)?;
    if out.len() > max_decoded {
        return Err(DecodeError::TooLarge { limit: max_decoded });
    }
    Ok(out)
}

/// How many spans `request` holds, over all its resources and scopes.
pub fn span_count(request: &ExportTraceServiceRequest) -> usize {
    request
        .resource_spans
        .iter()
        .flat_map(|resource| &resource.scope_spans)
        .map(|scope| scope.spans.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::{Compression, write::GzEncoder};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    use super::*;

    fn request(spans: usize) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: (0..spans)
                        .map(|i| Span {
                            name: format!("span {i}"),
                            trace_id: vec![1; 16],
                            span_id: vec![u8::try_from(i).unwrap(); 8],
                            ..Span::default()
                        })
                        .collect(),
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn content_types() {
        assert_eq!(
            Encoding::from_content_type("application/x-protobuf"),
            Some(Encoding::Protobuf)
        );
        assert_eq!(
            Encoding::from_content_type("Application/JSON; charset=utf-8"),
            Some(Encoding::Json)
        );
        assert_eq!(Encoding::from_content_type("text/plain"), None);
        assert_eq!(Encoding::from_content_type(""), None);
    }

    #[test]
    fn protobuf_round_trips() {
        let sent = request(3);
        let body = sent.encode_to_vec();
        let got = decode(&body, Encoding::Protobuf, None, body.len()).unwrap();
        assert_eq!(got, sent);
        assert_eq!(span_count(&got), 3);
    }

    #[test]
    fn json_uses_the_otlp_mapping() {
        // As an OTLP/JSON exporter sends it: hex ids, camelCase, integer enums.
        let body = br#"{"resourceSpans":[{"resource":{"attributes":[
            {"key":"k8s.pod.name","value":{"stringValue":"run-1"}}]},
          "scopeSpans":[{"scope":{"name":"goose"},"spans":[{
            "traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",
            "name":"load_skill","kind":1,"startTimeUnixNano":"1544712660000000000",
            "attributes":[{"key":"gen_ai.tool.name","value":{"stringValue":"load_skill"}}]}]}]}]}"#;
        let got = decode(body, Encoding::Json, None, body.len()).unwrap();
        let span = &got.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(
            span.span_id,
            [0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74]
        );
        assert_eq!(span.start_time_unix_nano, 1_544_712_660_000_000_000);
        assert_eq!(span_count(&got), 1);
    }

    #[test]
    fn gzip_bodies_decode_within_the_limit() {
        let sent = request(2);
        let plain = sent.encode_to_vec();
        let body = gzip(&plain);
        let got = decode(&body, Encoding::Protobuf, Some("gzip"), plain.len()).unwrap();
        assert_eq!(got, sent);
    }

    #[test]
    fn a_small_gzip_body_that_inflates_past_the_limit_is_refused() {
        let body = gzip(&vec![0_u8; 1 << 20]);
        assert!(body.len() < 4096, "the bomb is small on the wire");
        let error = decode(&body, Encoding::Protobuf, Some("gzip"), 4096).unwrap_err();
        assert!(
            matches!(error, DecodeError::TooLarge { limit: 4096 }),
            "{error}"
        );
    }

    #[test]
    fn plain_bodies_over_the_limit_are_refused() {
        let body = request(5).encode_to_vec();
        let error = decode(&body, Encoding::Protobuf, None, body.len() - 1).unwrap_err();
        assert!(matches!(error, DecodeError::TooLarge { .. }), "{error}");
    }

    #[test]
    fn unknown_content_encodings_and_garbage_are_errors() {
        let error = decode(b"x", Encoding::Protobuf, Some("br"), 10).unwrap_err();
        assert!(error.to_string().contains("\"br\""), "{error}");
        assert!(matches!(
            decode(b"{not json", Encoding::Json, None, 100),
            Err(DecodeError::Json(_))
        ));
        assert!(matches!(
            decode(&[0xff, 0xff, 0xff], Encoding::Protobuf, None, 100),
            Err(DecodeError::Protobuf(_))
        ));
        assert!(matches!(
            decode(b"not gzip", Encoding::Protobuf, Some("gzip"), 100),
            Err(DecodeError::Gzip(_))
        ));
    }
}
