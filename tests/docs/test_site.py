"""The documentation site and the README: the site builds with `mkdocs build --strict`, no internal
link or anchor is broken, the generated reference has an entry for every command, option and config
key, every committed figure has a results page with its provenance, and headless Chromium renders
the home page, a tutorial and a results page. Engine-free; the build takes a few seconds."""

from __future__ import annotations

import argparse
import html.parser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import matplotlib.image as mpimg
import numpy as np
import pytest

from kit.config import valid_keys
from tests.helpers import REPO

HOOK = REPO / "docs" / "hooks" / "generate.py"


def _hook():
    spec = importlib.util.spec_from_file_location("cepkit_docs_generate", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _hook()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return out


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name) and not (tag == "link" and attrs.get("rel") in ("canonical",)):
                self.links.append(attrs[name])


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def _target(site: Path, page: Path, url: str) -> Path:
    link = unquote(urlsplit(url).path)
    base = site if link.startswith("/") else page.parent
    path = (base / link.lstrip("/")).resolve() if link else page
    return path / "index.html" if path.is_dir() else path


def test_the_site_builds_strictly_with_every_page_of_the_nav(site):
    for page in ("index.html", "getting-started/index.html", "concepts/bounds/index.html", "tutorials/pairs/index.html",
                 "reference/cli/index.html", "reference/config/index.html", "reference/run-directory/index.html",
                 "specs/VALIDATION/index.html", "examples/external_engine/index.html", "results/index.html",
                 "results/thesis/pairs/index.html", "ci/index.html"):
        assert (site / page).is_file(), page


def test_no_internal_link_or_anchor_is_broken(site):
    broken, ids = [], {}
    # 404.html is served from any depth, so its links are absolute; they are checked from the root too.
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        ids[page.resolve()] = _parse(page).ids
    for page in pages:
        for url in _parse(page).links:
            parts = urlsplit(url)
            if parts.scheme or url.startswith(("//", "mailto:", "data:")):
                continue
            target = _target(site, page, url)
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {url}")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in ids.get(target, set()):
                broken.append(f"{page.relative_to(site)} -> {url} (no such anchor)")
    assert not broken, "\n".join(broken[:40])
    assert len(pages) > 40


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "a" / "index.html"
    page.parent.mkdir()
    page.write_text('<a href="../b/">b</a><a href="#here">x</a><p id="here"></p>')
    (target,) = [_target(tmp_path, page, url) for url in _parse(page).links if not url.startswith("#")]
    assert target == (tmp_path / "b").resolve() and not target.exists()


def test_every_command_and_option_has_an_entry_in_the_cli_reference(site):
    ids = _parse(site / "reference" / "cli" / "index.html").ids
    found = list(gen.commands())
    paths = {p for p, _, _ in found}
    for must in (("cepkit", "pairs"), ("cepkit", "micro"), ("cepkit", "datagen", "convert"), ("cepkit", "cluster", "start"),
                 ("cepkit", "config", "keys"), ("cepkit", "validate", "micro")):
        assert must in paths, must
    missing = [gen.command_id(p) for p in paths if gen.command_id(p) not in ids]
    missing += [gen.option_id(p, a) for p, _, parser in found for a in gen.options(parser)
                if gen.option_id(p, a) not in ids]
    assert not missing, missing
    text = (site / "reference" / "cli" / "index.html").read_text()
    assert "--validate-confirmation-only" in text and "kill-engine@40s" in text


def test_the_cli_reference_follows_a_parser_it_has_never_seen():
    parser = argparse.ArgumentParser(prog="cepkit", description="d")
    sub = parser.add_subparsers(dest="command")
    new = sub.add_parser("brand-new", help="a new command")
    new.add_argument("--shiny", choices=("a", "b"), help="a new option")
    deeper = new.add_subparsers(dest="x").add_parser("deeper", help="one level down")
    deeper.add_argument("thing", help="a positional")
    page = gen.cli_page(parser)
    assert '{#cepkit-brand-new}' in page and '{#cepkit-brand-new-deeper}' in page
    assert 'id="cepkit-brand-new--shiny"' in page and "(one of: a, b)" in page
    assert 'id="cepkit-brand-new-deeper--thing"' in page


def test_every_config_key_has_an_entry_with_its_type_default_and_comment(site):
    page = (site / "reference" / "config" / "index.html").read_text()
    ids = _parse(site / "reference" / "config" / "index.html").ids
    missing = [k for k in valid_keys() if gen.config_id(k) not in ids]
    assert not missing, missing
    row = re.search(r'id="config-run-driver_memory".*?</tr>', page, re.S).group(0)
    assert "string" in row and "<code>\"4g\"</code>" in row and "heap" in row
    row = re.search(r'id="config-pairs-scale_factor".*?</tr>', page, re.S).group(0)
    assert "integer, &gt; 0 and &lt;= 10000" in row and "<code>--sf</code>" in row     # the option that sets it
    row = re.search(r'id="config-micro-rate-profile".*?</tr>', page, re.S).group(0)
    assert "<code>\"constant\"</code>" in row          # the section's own default, not RateConfig's


def test_field_comments_come_from_the_source():
    from kit.config import RunConfig

    comments = gen.field_comments(RunConfig)
    assert "Spark's 1g default runs out" in comments["driver_memory"]
    assert comments["replay_rate_eps"] == 'replay = "constant": events per second'
    assert "key=value" in comments["spark_conf"]


def test_the_run_directory_page_draws_each_layout():
    page = gen.run_directory_page()
    for drawn in ("<run>/engine/", "<run>/report/", "<run>/<workload>/engine/", "search.json", "repeat-<stem>/run-1",
                  "repeat.json"):
        assert drawn in page, drawn


def test_every_committed_figure_has_a_results_page_with_its_provenance(site):
    files = gen.results_files()
    assert files
    for path in files:
        doc = gen._read_results(path)
        pages = gen.results_pages(path)
        base = f"results/{path.parent.name}"
        for figure in doc["figures"]:
            holders = [uri for uri, text in pages.items() if uri.endswith(".md") and f"]({figure})" in text]
            assert holders, f"{figure}: on no results page"
            built = site / holders[0].removesuffix(".md") / "index.html"
            text = built.read_text()
            for field in ("command", "commit", "machine", "plan", "repetitions", "verdict", "what bounded the run"):
                assert f"<td>{field}</td>" in text, (holders[0], field)
            assert (site / base / figure).is_file()
        pairs = pages[f"{base}/pairs.md"]
        for row in doc["table_7_1"]:            # every row of the table, as the results file has it
            assert f"| {gen._cell(row['p99'])} | {gen._cell(row['pscore'])} |" in pairs, row


def test_a_field_the_results_file_lacks_is_not_recorded_and_one_it_has_is_shown(tmp_path, monkeypatch):
    import json

    folder = tmp_path / "results" / "x"
    folder.mkdir(parents=True)
    point = {"suite": "patterns", "workload": "w", "engine": "flink", "params": "p", "eps": "1,000", "source": "runs/w",
             "point": {"searches": 3, "confirmed": True, "suite": "patterns", "workload": "w"},
             "machine": "2 cores, 24 GiB", "bound": "kit-bound (feed)"}
    (folder / "results.json").write_text(json.dumps({"kind": "cepkit.thesis-results", "generated": "g", "table_7_1": [],
                                                     "pairs": [], "micro": [point], "details": [], "figures": [],
                                                     "notes": []}))
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    page = gen.results_pages(folder / "results.json")["results/x/patterns.md"]
    assert "| machine | 2 cores, 24 GiB |" in page and "| what bounded the run | kit-bound (feed) |" in page
    assert "| commit | not recorded |" in page
    assert "| repetitions | 3 search(es) per point |" in page


# -- headless Chromium ------------------------------------------------------------------------------------

def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is not installed (bash scripts/setup.sh --test installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    return exe


def _run_chromium(exe: str, profile_dir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile_dir}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


SHOTS = Path(os.environ.get("CEPKIT_DOCS_SHOTS", "")) if os.environ.get("CEPKIT_DOCS_SHOTS") else None


@pytest.mark.parametrize("page, headings", [
    ("index.html", ("cepkit", "Two commands", "What it measures", "Where to go next")),
    ("tutorials/pairs/index.html", ("Pairs on an engine", "On Spark", "On Flink, and both side by side", "Step by step")),
    ("results/thesis/patterns/index.html", ("Q7 pattern (thesis Figure 4.15)", "Provenance", "Points", "Notes")),
])
def test_chromium_renders_the_page_with_its_headings(site, tmp_path, page, headings):
    exe = _chromium()
    url = (site / page).as_uri()
    dom = _run_chromium(exe, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shown = [re.sub(r"<[^>]+>|¶", "", h).strip() for h in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", dom.stdout, re.S)]
    for heading in headings:
        assert heading in shown, (heading, shown)
    png = tmp_path / "shot.png"
    shot = _run_chromium(exe, tmp_path / "profile-shot", f"--screenshot={png}", "--window-size=1280,2000",
                         "--hide-scrollbars", url)
    assert shot.returncode == 0 and png.exists(), shot.stderr[-2000:]
    img = mpimg.imread(png)
    assert img.shape[:2] == (2000, 1280)
    rgb = (img[..., :3] * 255).round().astype(np.uint8)
    colors = np.unique(rgb.reshape(-1, 3), axis=0)
    assert len(colors) > 50, f"only {len(colors)} distinct colours: blank page?"
    # Material's header bar (indigo) runs along the top, and the body has text: dark pixels below it.
    assert (np.abs(rgb[10, 640].astype(int) - (63, 81, 181)) < 12).all(), rgb[10, 640]
    assert (rgb[100:, :, :].max(axis=2) < 90).sum() > 2_000
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(png, SHOTS / (page.replace("/", "-").removesuffix("-index.html").removesuffix(".html") + ".png"))


# -- the README -------------------------------------------------------------------------------------------

README = REPO / "README.md"


def test_the_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, len(lines)
    commands = [line.split("#")[0].strip() for line in lines if line.startswith("bash scripts/")]
    assert commands[:2] == ["bash scripts/demo.sh", "bash scripts/test.sh"], commands


def test_the_readme_states_no_dated_figure():
    text = README.read_text(encoding="utf-8")
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text)


def test_every_docs_link_of_the_readme_exists():
    links = re.findall(r"\]\((docs/[^)#]+)", README.read_text(encoding="utf-8"))
    assert links
    missing = [link for link in links if not (REPO / link).exists()
               and not gen.generated_pages().get(link.removeprefix("docs/"))]
    assert not missing, missing
