"""test_head.py: the token configuration and the request-head rules (auth
configuration, authentication on the head, HTTP strictness), against the real segopsd over raw
sockets where an HTTP library would not produce the bytes."""
import json
import socket
import time

import pytest
from conftest import GOOD, OP, head, json_error, parse_response, raw, read_all, serving

TOKEN = "hostile-test-token-0123"


# --- token configuration -------------------------------------------------------------------

@pytest.mark.parametrize("content,why", [
    (b"\0" + TOKEN.encode() + b"\n", "0x00"),                    # would have turned auth off
    (b"ab\0" + TOKEN.encode(), "0x00"),                          # would have been cut at the NUL
    (("\ufeff" + TOKEN).encode("utf-16"), "0x"),                 # UTF-16 with a BOM
    (("\ufeff" + TOKEN).encode("utf-8"), "0xef"),                # UTF-8 BOM
    (TOKEN.encode() + b"\nsecond-line-token\n", "0x0a"),         # a second line
    (b"inner space token", "0x20"),
    (b"x" * 5000, "5000 bytes"),                                 # would have been cut to 4095
    (b"short", "5 bytes"),
    (b" \n\t\r\n", "no token"),
    (b"", "no token"),
])
def test_bad_token_file_refuses_to_start(daemon, tmp_path, content, why):
    f = tmp_path / "tok"
    f.write_bytes(content)
    d = daemon("--token-file", str(f), expect_start=False)
    assert d.proc.wait(timeout=30) == 2
    err = d.stderr_text()
    assert "token" in err and why in err, err


@pytest.mark.parametrize("value,why", [("", "no token"), ("abc\x01defghijk", "0x01"), ("tok", "3 bytes"),
                                       ("caf\u00e9-token-long", "0xc3"), ("a b c d e f g h", "0x20")])
def test_bad_token_variable_refuses_to_start(daemon, value, why):
    d = daemon(env={"SEGOPS_TOKEN": value}, expect_start=False)
    assert d.proc.wait(timeout=30) == 2
    assert why in d.stderr_text()


def _auth_status(d, token):
    c = d.conn()
    c.request("GET", "/v1/info", headers={"Authorization": f"Bearer {token}"} if token else {})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


@pytest.mark.parametrize("how", ["file-spaces", "file-crlf", "env-newline", "env-spaces"])
def test_surrounding_whitespace_is_trimmed_alike(daemon, tmp_path, how):
    if how.startswith("file"):
        f = tmp_path / "tok"
        f.write_bytes((b"  \t" + TOKEN.encode() + b"  \n") if how == "file-spaces" else TOKEN.encode() + b"\r\n")
        d = daemon("--token-file", str(f))
    else:
        d = daemon(env={"SEGOPS_TOKEN": TOKEN + "\n" if how == "env-newline" else "  " + TOKEN + " "})
    assert _auth_status(d, TOKEN) == 200
    assert _auth_status(d, TOKEN[:-1]) == 401
    assert _auth_status(d, None) == 401


def test_long_token_is_whole(daemon, tmp_path):
    tok = "t" * 1024
    f = tmp_path / "tok"
    f.write_text(tok + "\n")
    d = daemon("--token-file", str(f))
    assert _auth_status(d, tok) == 200
    assert _auth_status(d, tok[:1023]) == 401


# --- authentication on the head --------------------------------------------------------------

def test_401_before_the_body_and_without_100_continue(daemon):
    d = daemon(env={"SEGOPS_TOKEN": TOKEN})
    # Expect: 100-continue: the 401 comes instead of 100 Continue.
    s = d.sock()
    s.sendall(head(1 << 20, b"Expect: 100-continue\r\n"))
    data = read_all(s, 5)
    s.close()
    assert b"100 Continue" not in data
    code, _, hdr, _ = json_error(data, 401)
    assert code == "unauthenticated" and hdr.get("www-authenticate", "").startswith("Bearer")
    # A body that never comes (or trickles): the 401 does not wait for it.
    s = d.sock()
    t0 = time.time()
    s.sendall(head(100000) + b"{")
    data = read_all(s, 5)
    s.close()
    assert time.time() - t0 < 3
    json_error(data, 401)
    assert _auth_status(d, TOKEN) == 200


# --- HTTP strictness -------------------------------------------------------------------------

SMUGGLED = b"GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n"


def _no_second_answer(rest):
    assert b"HTTP/1.1" not in rest, rest[:200]


def test_conflicting_content_length_is_400_and_close(daemon):
    d = daemon()
    body = GOOD + SMUGGLED
    data = raw(d, head(len(body), b"Content-Length: %d\r\n" % len(GOOD)) + body)
    code, msg, hdr, rest = json_error(data, 400)
    assert "Content-Length" in msg and hdr.get("connection") == "close"
    _no_second_answer(rest)
    # The same value twice is one length (RFC 9110 allows it).
    data = raw(d, head(len(GOOD), b"Content-Length: %d\r\n" % len(GOOD)) + GOOD, timeout=2)
    assert data.startswith(b"HTTP/1.1 200")


def test_content_length_with_chunked_is_400_and_close(daemon):
    d = daemon()
    data = raw(d, head(5, b"Transfer-Encoding: chunked\r\n") + b"0\r\n\r\n" + SMUGGLED)
    code, msg, hdr, rest = json_error(data, 400)
    assert "Transfer-Encoding" in msg and hdr.get("connection") == "close"
    _no_second_answer(rest)
    assert serving(d)


@pytest.mark.parametrize("te", [b"gzip, chunked", b"identity", b"xyz", b"chunked, chunked"])
def test_other_transfer_encodings_are_501(daemon, te):
    d = daemon()
    data = raw(d, head(None, b"Transfer-Encoding: " + te + b"\r\n") + b"0\r\n\r\n")
    code, _, hdr, _ = json_error(data, 501)
    assert code == "not_implemented" and hdr.get("connection") == "close"


@pytest.mark.parametrize("cl", [b"abc", b"-1", b"+45", b"10, 10"])
def test_bad_content_length_is_refused_and_closed(daemon, cl):
    """libmicrohttpd 0.9.75 answers these itself, before the access handler (its own HTML body);
    what segopsd controls: a 400 first, the connection closed, the daemon unharmed. Still open, in
    the library: its status line and headers go out twice (connection.c: parse_connection_headers
    queues the error and builds its header block, then the HEADERS_RECEIVED case sets the state to
    HEADERS_PROCESSED, and START_REPLY builds the block again); no callback runs in between."""
    d = daemon()
    data = raw(d, b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nContent-Length: " + cl + b"\r\n\r\n"
               + b"0123456789" + SMUGGLED)
    assert data.startswith(b"HTTP/1.1 400 "), data[:200]
    assert b"/v1/info" not in data and b'"version"' not in data  # nothing smuggled was answered
    assert serving(d)


def test_encoded_nul_in_path_is_400(daemon):
    d = daemon()
    code, msg, _, _ = json_error(raw(d, b"GET /healthz%00/v1/info HTTP/1.1\r\nHost: x\r\n\r\n"), 400)
    assert "%00" in msg


@pytest.mark.parametrize("path", [b"/v1%2Finfo", b"/v1%2finfo", b"/v1/segmented_sum%2Fforward"])
def test_encoded_slash_is_not_a_separator(daemon, path):
    d = daemon()
    code, _, _, _ = json_error(raw(d, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n", timeout=2), 404)
    assert code == "not_found"
    # Other escapes still decode.
    assert raw(d, b"GET /health%7A HTTP/1.1\r\nHost: x\r\n\r\n", timeout=2).startswith(b"HTTP/1.1 200")


def test_http11_without_host_is_400(daemon):
    d = daemon()
    json_error(raw(d, b"GET /healthz HTTP/1.1\r\n\r\n"), 400)
    # HTTP/1.0 has no Host requirement.
    assert raw(d, b"GET /healthz HTTP/1.0\r\n\r\n").split(b"\r\n")[0].endswith(b" 200 OK")
    assert serving(d)


def test_huge_query_string_gets_one_answer(daemon):
    """25000 query parameters once exhausted libmicrohttpd's per-connection pool (431 logged,
    nothing sent). No route takes a query: it is ignored, and the request answered once. A head
    larger than the connection memory (64 KiB, server/http/http_connmem.h) is refused with one
    414 and the connection closed; a 40 KB one is served."""
    d = daemon()
    for n in (10, 5000, 25000):  # URIs of ~60 B, ~40 KB, ~210 KB
        q = b"&".join(b"a%d=1" % i for i in range(n))
        data = raw(d, b"GET /healthz?" + q + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=5)
        status, _, body, rest = parse_response(data)
        if n == 25000:
            assert status == 414, (n, data[:200])
        else:
            assert status == 200 and json.loads(body)["status"] == "ok", (n, data[:200])
        assert rest == b"", rest[:200]  # one answer, nothing after it
    # An op with a short query answers as without one; a 200 KB query gets one 414.
    for n, want in ((100, 200), (25000, 414)):
        data = raw(d, head(len(GOOD), path=OP + b"?" + b"&".join(b"k%d" % i for i in range(n)),
                           extra=b"Connection: close\r\n") + GOOD, timeout=5)
        status, _, body, rest = parse_response(data)
        assert status == want and rest == b"", data[:300]
        if want == 200:
            assert "out" in json.loads(body)
    assert serving(d)
