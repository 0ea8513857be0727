"""The published pages, opened in a real headless Chromium: asv's graphs and the project's report.

Why a browser and not a file check: asv's index draws its graphs with JavaScript
(flot, into canvases) from JSON it fetches, so a published index.html can exist
and show nothing; it must also be served over HTTP, as ``asv preview`` does. The
report's plots are PNGs beside its page; a wrong path is a broken image. So the
test looks at what Chromium drew: canvases with nonzero size and painted pixels,
images that decoded with nonzero size, and the speedup table with its rows.

Selenium (PyPI) drives Debian's chromium + chromium-driver: the driver is the
browser's own build, so nothing is downloaded at run time (Playwright would fetch
a browser build of its own from outside the package registries). Numbers come
from a real asv run (ci/asv-smoke --keep: `asv run --quick -b bench_planning`
and `asv publish`) and from `ralp-bench report` over the committed results. asv's pages load jQuery
and flot from CDNs; ci/asv-smoke runs ci/asv-offline so they load local copies.
Screenshots go to this run's pytest temporary directory; their paths are printed.
"""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
SETUP_HINT = "apt-get install chromium chromium-driver (ci/setup.sh does it)"


def _browser_paths():
    binary = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    return binary, shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary, driver_path = _browser_paths()
    if not (binary and driver_path):
        missing = "chromium" if not binary else "chromedriver"
        if os.environ.get("CI"):
            pytest.fail(f"{missing} not found in CI; {SETUP_HINT}")
        pytest.skip(f"{missing} not installed here (not CI): {SETUP_HINT}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed; pip install -r requirements.txt (ci/setup.sh does it)")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver or browser
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1800"):
        options.add_argument(arg)
    # Chromium makes its singleton socket's directory in $TMPDIR and leaves it after quit(): one
    # org.chromium.Chromium.* per session in /tmp. Its own temporary directory keeps /tmp clean.
    scratch = tmp_path_factory.mktemp("chromium")
    options.add_argument(f"--user-data-dir={scratch / 'profile'}")
    service = Service(executable_path=driver_path, env={**os.environ, "TMPDIR": str(scratch)})
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def screens(tmp_path_factory):
    return tmp_path_factory.mktemp("screens")


def _shot(driver, path, capsys):
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000, f"{path}: a blank page's screenshot"
    with capsys.disabled():
        print(f"\n[test_browser] screenshot: {path}")


def _wait(driver, script, timeout=60, what="the page"):
    """Poll a JavaScript expression until it is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


# Canvases with nonzero size and at least one painted (non-transparent) pixel.
PAINTED_CANVASES = """
const out = [];
for (const c of document.querySelectorAll(arguments[0])) {
  const r = c.getBoundingClientRect();
  if (r.width < 1 || r.height < 1) continue;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let painted = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) painted++;
  if (painted > 0) out.push([Math.round(r.width), Math.round(r.height), painted]);
}
return out.length ? out : null;
"""


@pytest.fixture(scope="module")
def asv_html(tmp_path_factory):
    """A real asv run of the cheap benchmarks, published: ci/asv-smoke --keep DIR."""
    work = tmp_path_factory.mktemp("asv")
    home = work / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "TF_CPP_MIN_LOG_LEVEL": "2",
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("RALP_ASV_PROFILE", None)
    gitconfig = Path.home() / ".gitconfig"
    if gitconfig.exists():  # keep safe.directory and the like with the temporary HOME
        env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    proc = subprocess.run(["bash", str(ROOT / "ci" / "asv-smoke"), "--keep", str(work / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work / "out"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def asv_preview(asv_html):
    """`asv preview` serving the published pages, as the README tells users to."""
    port = _free_port()
    proc = subprocess.Popen([str(VENV_BIN / "asv"), "--config", str(asv_html / "asv.conf.json"), "preview",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "index.json", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"asv preview did not serve {url} (exit {proc.poll()})")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_asv_index_draws_a_graph_per_benchmark(browser, asv_preview, screens, capsys):
    browser.get(asv_preview)
    names = _wait(browser, "const n = [...document.querySelectorAll('#summarygrid-display .benchmark-container')]"
                           ".map(e => e.textContent.trim()); return n.length ? n : null;",
                  what="asv's summary grid")
    assert any("PredictedSpeedup" in n for n in names) and any("TimeAnalyze" in n for n in names), names
    drawn = _wait(browser, f"return (function() {{{PAINTED_CANVASES}}}).apply(null, ['#summarygrid-display canvas']);",
                  what="a painted graph in the summary grid")
    assert len(drawn) >= 2, drawn  # one small graph per benchmark, each with painted pixels
    _shot(browser, screens / "asv-index.png", capsys)

    browser.get(asv_preview + "#bench_planning.PredictedSpeedup.track_predicted_speedup")
    graph = _wait(browser, f"return (function() {{{PAINTED_CANVASES}}}).apply(null, ['#main-graph canvas']);",
                  what="the benchmark's own graph")
    assert max(w for w, _, _ in graph) > 300, graph
    _shot(browser, screens / "asv-graph.png", capsys)


FAIR_RUN = "20261203T092100Z-50a016"  # results/fair/report.md


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    """`ralp-bench report` of the committed fair-comparison run (issue 13: both PS layouts, Horovod,
    RALP), written to a temporary directory. A named run, not --latest: the newest committed run
    changes with every sweep and need not have every column this test reads."""
    out = tmp_path_factory.mktemp("report")
    proc = subprocess.run([str(VENV_BIN / "ralp-bench"), "report", "--results", str(ROOT / "results"),
                           "--run", FAIR_RUN, "--out", str(out)], capture_output=True, text=True, timeout=240,
                          cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / "index.html").exists(), f"ralp-bench report wrote no index.html in {out}"
    return out / "index.html"


IMAGES = """
const imgs = [...document.images];
if (!imgs.length || imgs.some(i => !i.complete)) return null;
return imgs.map(i => [i.getAttribute('src'), i.naturalWidth, Math.round(i.getBoundingClientRect().width),
                      Math.round(i.getBoundingClientRect().height)]);
"""

SPEEDUP_TABLE = """
const h = [...document.querySelectorAll('h2')].find(e => e.textContent.includes('Throughput and speedup'));
let t = h && h.nextElementSibling;
while (t && t.tagName !== 'TABLE') t = t.nextElementSibling;
if (!t) return null;
const r = t.getBoundingClientRect();
return {header: [...t.querySelectorAll('th')].map(e => e.textContent.trim()),
        rows: [...t.querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(c => c.textContent.trim())),
        width: r.width, height: r.height};
"""


def test_report_shows_its_plots_and_the_speedup_table(browser, report_page, screens, capsys):
    browser.get(report_page.as_uri())
    images = _wait(browser, IMAGES, what="the report's images to load")
    assert len(images) >= 2, images
    for src, natural, width, height in images:
        assert natural > 0 and width > 0 and height > 0, f"{src} did not render ({natural}px, {width}x{height})"
    table = _wait(browser, SPEEDUP_TABLE, what="the 'Throughput and speedup' table")
    assert table["width"] > 0 and table["height"] > 0, table
    assert {"model", "workers", "ps", "ralp"} <= set(table["header"]), table["header"]
    assert table["rows"], "the speedup table has no rows"
    assert any("×" in cell for row in table["rows"] for cell in row), table["rows"]  # the speedups themselves
    _shot(browser, screens / "report.png", capsys)
