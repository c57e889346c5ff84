"""Static serving: escapes refused (acceptance 4), registries from the real corpus, sidecars."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from browser_fixture_helpers import corpus_or_skip, port_of, raw_http, serve
from metewand.suites.browser.fixtures import (
    FixtureServer,
    FixtureTreeError,
    NonLoopbackBindError,
    ServerThread,
)
from metewand.suites.browser.fixtures.tree import load_routes


@pytest.fixture(scope="module")
def corpus_server() -> Iterator[ServerThread]:
    yield from serve(corpus_or_skip())


ESCAPES = [
    b"/fixtures/../manifest.json",
    b"/fixtures/../../etc/passwd",
    b"/../../../etc/passwd",
    b"/fixtures/%2e%2e/manifest.json",
    b"/fixtures/%2E%2E/%2e%2e/etc/passwd",
    b"/fixtures/..%2fmanifest.json",
    b"/fixtures/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    b"/fixtures/l1/%2e%2e/%2e%2e/manifest.json",
    b"/fixtures/%252e%252e/manifest.json",
    b"/fixtures/..%5cmanifest.json",
    b"/fixtures//etc/passwd",
    b"/fixtures/%2fetc%2fpasswd",
    b"//etc/passwd",
    b"/etc/passwd",
    b"/fixtures/l1/core.html%00.png",
    b"http://127.0.0.1/fixtures/../manifest.json",
]


@pytest.mark.parametrize("target", ESCAPES, ids=lambda t: t.decode())
def test_escapes_are_404(corpus_server: ServerThread, target: bytes) -> None:
    exchange = raw_http(port_of(corpus_server), target)
    assert exchange.status in (400, 404), exchange.head
    assert b"root:" not in exchange.body and b"bench_id" not in exchange.body


def test_control_request_is_served(corpus_server: ServerThread) -> None:
    # The same server serves an in-root path, so the 404s above are refusals, not outages.
    exchange = raw_http(port_of(corpus_server), b"/fixtures/l1/core.html")
    assert exchange.status == 200
    assert exchange.body == (corpus_or_skip() / "l1/core.html").read_bytes()


def _registry_files(root: Path) -> list[str]:
    names = ("expected_answers.json", "routes.json")
    suffixes = ("expected_answers.fragment.json", "routes.fragment.json", ".headers.json")
    found = [p for p in root.rglob("*") if p.name in names or p.name.endswith(suffixes)]
    return sorted("/fixtures/" + p.relative_to(root).as_posix() for p in found)


def test_every_registry_file_is_404(corpus_server: ServerThread) -> None:
    files = _registry_files(corpus_or_skip())
    assert any(f.endswith("/expected_answers.json") for f in files)
    assert sum(f.endswith("expected_answers.fragment.json") for f in files) >= 7
    for target in files:
        for variant in (target, target.replace("expected", "%65xpected")):
            exchange = raw_http(port_of(corpus_server), variant.encode())
            assert exchange.status == 404, (variant, exchange.head)


def test_every_corpus_route_serves_its_file(corpus_server: ServerThread) -> None:
    root = corpus_or_skip()
    routes = load_routes(root)
    assert len(routes) >= 120 and routes["/l1/core"] == "l1/core.html"
    for url_path, rel in routes.items():
        exchange = raw_http(port_of(corpus_server), url_path.encode())
        assert exchange.status == 200, url_path
        assert exchange.body == (root / rel).read_bytes(), url_path


def test_every_corpus_task_scene_resolves(corpus_server: ServerThread) -> None:
    corpus = corpus_or_skip().parent
    urls = set()
    for task_file in corpus.glob("tasks/*/*/*.json"):
        scene = json.loads(task_file.read_text())["scene"]
        if "url" in scene:
            urls.add(scene["url"].format(seed="s1", session="sess1").split("#")[0])
    assert len(urls) > 150
    for url in sorted(urls):
        assert _final_status(port_of(corpus_server), url) == 200, url


def _final_status(port: int, url: str, hops: int = 5) -> int:
    """Status after following same-server redirects (a scene may start with a redirect chain,
    as a browser follows it)."""
    exchange = raw_http(port, url.encode())
    location = exchange.header("Location")
    if exchange.status in (301, 302, 303, 307, 308) and location and hops > 0:
        path = urlsplit(urljoin(url, location))
        assert path.hostname in (None, "127.0.0.1"), location
        return _final_status(port, path.path + (f"?{path.query}" if path.query else ""), hops - 1)
    return exchange.status


def test_sidecar_headers_and_content_types(corpus_server: ServerThread) -> None:
    port = port_of(corpus_server)
    download = raw_http(port, b"/download.txt")
    assert download.header("Content-Disposition") == 'attachment; filename="download.txt"'
    assert download.header("Content-Type") == "text/plain"
    report = raw_http(port, b"/v2/t2a/download")
    assert report.header("Content-Disposition") == 'attachment; filename="t2a-report.bin"'
    assert raw_http(port, b"/v2/t2a/csp").header("Content-Security-Policy") == "script-src 'none'"
    assert raw_http(port, b"/v2/t2a/cacheable.txt").header("Cache-Control") == (
        "max-age=3600, public"
    )
    assert raw_http(port, b"/v0_4/net/data").header("Content-Type") == "application/json"
    assert raw_http(port, b"/pixel.png").header("Content-Type") == "image/png"
    assert (
        raw_http(port, b"/l1/core")
        .header(
            "Content-Type",
        )
        .startswith("text/html")
    )
    assert raw_http(port, b"/app.js").header("Content-Type").startswith("text/javascript")


def test_symlink_out_of_root_is_404(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "pages").mkdir(parents=True)
    (root / "pages" / "in.html").write_text("<p>in</p>")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    os.symlink(secret, root / "pages" / "leak.txt")
    os.symlink(tmp_path, root / "up")
    (root / "routes.json").write_text(json.dumps({"/in": "pages/in.html"}))
    for thread in serve(root):
        port = port_of(thread)
        assert raw_http(port, b"/in").body == b"<p>in</p>"
        assert raw_http(port, b"/fixtures/pages/leak.txt").status == 404
        assert raw_http(port, b"/fixtures/up/secret.txt").status == 404
        assert raw_http(port, b"/fixtures/routes.json").status == 404


def test_a_small_file_is_read_once_for_the_run_a_large_one_at_every_request(
    tmp_path: Path,
) -> None:
    """A run's corpus is fixed, so a small file's bytes are kept after its first request (the
    same holds for its lookup); a file above ``BODY_CACHE_BYTES`` is read at each request."""
    from metewand.suites.browser.fixtures.tree import BODY_CACHE_BYTES

    root = tmp_path / "root"
    root.mkdir()
    small, large = root / "small.html", root / "large.bin"
    small.write_bytes(b"<p>first</p>")
    large.write_bytes(b"a" * (BODY_CACHE_BYTES + 1))
    for thread in serve(root):
        port = port_of(thread)
        assert raw_http(port, b"/fixtures/small.html").body == b"<p>first</p>"
        assert raw_http(port, b"/fixtures/large.bin").body == b"a" * (BODY_CACHE_BYTES + 1)
        small.write_bytes(b"<p>edited mid-run</p>")
        large.write_bytes(b"b" * (BODY_CACHE_BYTES + 1))
        assert raw_http(port, b"/fixtures/small.html").body == b"<p>first</p>"
        assert raw_http(port, b"/fixtures/large.bin").body == b"b" * (BODY_CACHE_BYTES + 1)


def test_route_to_escaping_file_is_rejected_at_load(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "routes.json").write_text(json.dumps({"/x": "../secret"}))
    (tmp_path / "secret").write_text("s")
    with pytest.raises(FixtureTreeError, match="/x"):
        FixtureServer(tmp_path / "root")


def test_separate_answers_root_inside_tree_is_hidden(tmp_path: Path) -> None:
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "notes.json").write_text("{}")
    (tmp_path / "answers" / "expected_answers.json").write_text(
        json.dumps({"t1": {"expected": "A", "mode": "equals"}})
    )
    (tmp_path / "page.html").write_text("p")
    for thread in serve(tmp_path, answers_roots=[tmp_path / "answers"]):
        assert thread.server.answers.grade("t1", "A").ok
        assert raw_http(port_of(thread), b"/fixtures/page.html").status == 200
        assert raw_http(port_of(thread), b"/fixtures/answers/notes.json").status == 404


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "localhost", "example.com"])
def test_non_loopback_bind_is_refused(tmp_path: Path, host: str) -> None:
    with pytest.raises(NonLoopbackBindError, match="loopback"):
        FixtureServer(tmp_path, host=host)


def test_other_loopback_addresses_bind(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    for thread in serve(tmp_path, host="127.0.0.2"):
        assert thread.server.base_url is not None
        assert thread.server.base_url.startswith("http://127.0.0.2:")
        assert port_of(thread) > 0
