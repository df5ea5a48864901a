"""The dlap page of the Dask dashboard, on a real CPU LocalCluster: the scheduler's registry keeps
rank 0's progress, the page is served at /dlap, and, in a real headless Chromium (where it and
its driver are installed: Debian's chromium and chromium-driver, with selenium), it shows a
running solve's matched rows advancing and then the solve done. ``DLAP_DASHBOARD_SCREENSHOT=x.png``
keeps screenshots of the page (x-running.png during the solve, x.png after)."""

import os
import shutil
import threading
import time
import urllib.request

import pytest

pytestmark = pytest.mark.distributed

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
pytest.importorskip("bokeh")

import dlap.distributed as dd  # noqa: E402
from dlap.distributed.scheduler import dashboard  # noqa: E402
from dlap.generate import geometric_dask, uniform_dask  # noqa: E402

from ..helpers import registry_rows  # noqa: E402

N = 6000  # the tree variant on two CPU workers
SCALING_N = 800  # ε-scaling split over two CPU workers

#: a column's place in the page's rows
COLUMN = {key: k for k, (key, _) in enumerate(dashboard.COLUMNS)}
#: the page's table rows as lists of cell texts (Bokeh renders into shadow roots)
ROWS_JS = """
function rows(root) {
  let out = [];
  for (const tr of root.querySelectorAll("tr")) out.push([...tr.querySelectorAll("td")].map(td => td.textContent));
  for (const e of root.querySelectorAll("*")) if (e.shadowRoot) out = out.concat(rows(e.shadowRoot));
  return out;
}
return rows(document);
"""


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as client:
            yield client


def solve_in_background(client, method="tree"):
    if method == "tree":
        cost = uniform_dask(N, 10, seed=9, chunks=(N, N // 2 + 1))  # generated on the workers
    else:  # a column split: every step of a search is a collective
        cost = geometric_dask(SCALING_N, seed=3, chunks=(SCALING_N, SCALING_N // 2 + 1))
    thread = threading.Thread(target=dd.solve, args=(cost, client), kwargs={"method": method})
    thread.start()
    return thread


def running(client):
    """The id of the solve running now, once the registry has it."""
    while True:
        rows = [r for r in registry_rows(client) if r["state"] == "running"]
        if rows:
            return rows[0]["solve"]
        time.sleep(0.05)


def rows_while_running(client, method: str, pause: float) -> tuple[str, list]:
    """A solve of ``method`` in the background: its id, and the registry's rows of it while it ran
    (read every ``pause`` seconds), once it has ended."""
    thread = solve_in_background(client, method)
    solve = running(client)
    seen = []
    while thread.is_alive():
        seen += [r for r in registry_rows(client) if r["solve"] == solve and r["state"] == "running"]
        time.sleep(pause)
    thread.join()
    return solve, seen


def test_the_registry_follows_a_solve_and_the_page_is_served(client):
    solve, seen = rows_while_running(client, "tree", 0.2)
    matched = [row["matched"] for row in seen]
    assert len(set(matched)) >= 2 and matched == sorted(matched), matched
    assert all(row["method"] == "tree" and row["ranks"] == 2 and row["total"] == N for row in seen)
    last = next(r for r in registry_rows(client) if r["solve"] == solve)
    assert last["state"] == "done" and last["matched"] == N and last["collectives"] > 0 and last["bytes_sent"] > 0
    assert "forward_pass" in last["phase_seconds"] and last["done"] == "100%" and last["eta"] == ""
    page = urllib.request.urlopen(client.dashboard_link.replace("/status", "/dlap"))
    assert page.status == 200 and "bokeh" in page.read().decode()


def test_a_split_epsilon_scaling_solve_advances_phase_by_phase(client):
    """Its rows are matched again in every phase, so the page follows the estimate of the work
    done (dlap.progress): it advances through the ε-phases while matched rows rise and fall."""
    solve, seen = rows_while_running(client, "scaling", 0.1)
    done = [int(row["done"].rstrip("%")) for row in seen]
    assert len(set(done)) >= 3 and done == sorted(done), done
    assert any(row["stage"].startswith("ε-phase") for row in seen) and any(row["eta"] for row in seen)
    last = next(r for r in registry_rows(client) if r["solve"] == solve)
    assert last["state"] == "done" and last["done"] == "100%" and last["matched"] == SCALING_N


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    # no background traffic: this machine's network is closed beyond localhost
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1600,500"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


@pytest.mark.browser
def test_the_page_shows_progress_in_a_real_browser(client, tmp_path):
    browser = _browser()
    try:
        thread = solve_in_background(client)
        solve = running(client)
        browser.get(client.dashboard_link.replace("/status", "/dlap"))
        shown = []
        while thread.is_alive():
            rows = [r for r in browser.execute_script(ROWS_JS) if r and r[0] == solve and r[1] == "running"]
            shown += [int(rows[0][COLUMN["matched"]])] if rows else []  # its matched rows, as the page shows them
            if len(set(shown)) == 2 and os.environ.get("DLAP_DASHBOARD_SCREENSHOT"):
                browser.save_screenshot(os.environ["DLAP_DASHBOARD_SCREENSHOT"].replace(".png", "-running.png"))
            time.sleep(0.3)
        thread.join()
        time.sleep(1.0)  # the next refresh shows the solve done
        final = next(r for r in browser.execute_script(ROWS_JS) if r and r[0] == solve)
        browser.save_screenshot(os.environ.get("DLAP_DASHBOARD_SCREENSHOT", str(tmp_path / "dlap.png")))
    finally:
        browser.quit()
    assert len(set(shown)) >= 2 and shown == sorted(shown), shown  # advancing, as the page showed it
    assert final[1] == "done" and final[COLUMN["matched"]] == final[COLUMN["total"]] == str(N)
    assert final[COLUMN["done"]] == "100%"
