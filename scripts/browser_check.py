"""Check the built book in headless Chromium, as a reader would see it.

    python scripts/browser_check.py site [--screenshots DIR]

Serves site/ on a local port and opens every HTML page in headless Chromium (through
selenium and Debian's chromium-driver). For each page it checks that:

* the page loads, and the browser console shows no error (level SEVERE);
* every image loaded (naturalWidth > 0), and no resource came from another host;
* on the first page with twin tabs, clicking "Optimized (C++)" shows that tab's content in
  every tab set of the page (content.tabs.link), and later pages open on it too;
* a page that includes a generated table (``chapters/generated/<group>-table.md``) shows
  it: a ``div.tm-bench[data-group=<group>]`` with a filled table, or the "no measurements
  yet" note (``--require-measurements`` refuses the note).

Every wait is bounded (30 s per page, ``--timeout`` for the whole run); any failure exits
non-zero with a message naming the page. Runs as root in CI, hence --no-sandbox.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parent.parent
NAIVE, OPTIMIZED = "Naive (Python)", "Optimized (C++)"
PAGE_TIMEOUT = 30.0
TABLE_REF = re.compile(r"""^[ \t]*-+8<-+[ \t]+["']chapters/generated/([-_0-9a-z]+)-table\.md["']""",
                       re.IGNORECASE | re.MULTILINE)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass


@dataclass
class Report:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, page: str, message: str) -> None:
        self.failures.append(f"{page}: {message}")


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def make_driver() -> webdriver.Chrome:
    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(PAGE_TIMEOUT)
    driver.set_script_timeout(PAGE_TIMEOUT)
    return driver


def page_url(md: Path, chapters: Path) -> str:
    """The URL path mkdocs gives a page (use_directory_urls): 01-x.md -> 01-x/, index.md -> ''."""
    rel = md.relative_to(chapters).with_suffix("")
    if rel.name == "index":
        rel = rel.parent
    return "" if str(rel) == "." else f"{rel.as_posix()}/"


def expected_tables(chapters: Path) -> dict[str, list[str]]:
    """Page URL -> benchmark groups whose generated table the page includes."""
    out: dict[str, list[str]] = {}
    for md in sorted(chapters.rglob("*.md")):
        if "generated" in md.relative_to(chapters).parts:
            continue
        groups = TABLE_REF.findall(md.read_text(encoding="utf-8"))
        if groups:
            out[page_url(md, chapters)] = groups
    return out


def wait_loaded(driver: webdriver.Chrome) -> None:
    WebDriverWait(driver, PAGE_TIMEOUT).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def console_errors(driver: webdriver.Chrome) -> list[str]:
    entries = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return [str(e.get("message")) for e in entries if e.get("level") == "SEVERE"]


def check_resources(driver: webdriver.Chrome, base: str, page: str, report: Report) -> None:
    broken = driver.execute_script(
        "return Array.from(document.images)"
        ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.currentSrc || i.src);")
    for src in broken:
        report.fail(page, f"image did not load: {src}")
    foreign = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => !n.startsWith(arguments[0]) && !n.startsWith('data:'));", base)
    for url in foreign:
        report.fail(page, f"resource from another host (the book must work offline): {url}")


def tab_state(driver: webdriver.Chrome) -> list[dict[str, bool]]:
    """For each tab set with both twin labels: is each twin's content visible?"""
    states = []
    for tabset in driver.find_elements(By.CSS_SELECTOR, ".tabbed-set"):
        labels = tabset.find_elements(By.CSS_SELECTOR, ":scope > .tabbed-labels > label")
        blocks = tabset.find_elements(By.CSS_SELECTOR, ":scope > .tabbed-content > .tabbed-block")
        names = [(lb.get_attribute("textContent") or "").strip() for lb in labels]
        if NAIVE in names and OPTIMIZED in names and len(blocks) == len(labels):
            states.append({name: blocks[names.index(name)].is_displayed()
                           for name in (NAIVE, OPTIMIZED)})
    return states


def click_label(driver: webdriver.Chrome, text: str) -> None:
    for label in driver.find_elements(By.CSS_SELECTOR, ".tabbed-set > .tabbed-labels > label"):
        if (label.get_attribute("textContent") or "").strip() == text:
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", label)
            label.click()
            return
    raise AssertionError(f"no tab labelled {text!r}")


def check_tabs(driver: webdriver.Chrome, page: str, first: bool, report: Report) -> None:
    states = tab_state(driver)
    if not states:
        return
    if first:
        if not all(s[NAIVE] and not s[OPTIMIZED] for s in states):
            report.fail(page, f"tab sets should open on {NAIVE!r} before any choice: {states}")
        click_label(driver, OPTIMIZED)
        try:
            WebDriverWait(driver, 5).until(
                lambda d: all(s[OPTIMIZED] and not s[NAIVE] for s in tab_state(d)))
        except WebDriverException:
            report.fail(page, f"clicking {OPTIMIZED!r} did not switch every tab set: "
                              f"{tab_state(driver)}")
            return
        report.notes.append(f"{page}: clicking {OPTIMIZED!r} switched {len(states)} tab set(s)")
    elif not all(s[OPTIMIZED] and not s[NAIVE] for s in states):
        report.fail(page, f"tab sets did not follow the {OPTIMIZED!r} choice made on an "
                          f"earlier page (linked tabs): {states}")


def check_tables(driver: webdriver.Chrome, page: str, groups: list[str], require: bool,
                 report: Report) -> None:
    # A table file is named by its group's slug (figures.py: "_" becomes "-"), while the
    # div carries the group's own name: compare them as slugs.
    divs: dict[str, list[Any]] = {}
    for div in driver.find_elements(By.CSS_SELECTOR, "div.tm-bench[data-group]"):
        name = (div.get_attribute("data-group") or "").replace("_", "-")
        divs.setdefault(name, []).append(div)
    for group in groups:
        found = divs.get(group.replace("_", "-"), [])
        if not found:
            report.fail(page, f"generated table of group {group!r} is missing")
            continue
        div = found[0]
        if "tm-bench-missing" in (div.get_attribute("class") or ""):
            if require:
                report.fail(page, f"group {group!r} has no measurements (placeholder shown)")
            else:
                report.notes.append(f"{page}: group {group!r} shows 'no measurements yet'")
            continue
        rows = div.find_elements(By.CSS_SELECTOR, "table tbody tr")
        if not rows or not div.is_displayed():
            report.fail(page, f"table of group {group!r} is empty or hidden")


def run(site: Path, chapters: Path, require: bool, screenshots: Path | None) -> Report:
    report = Report()
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    if not pages:
        report.fail(str(site), "no HTML pages (run mkdocs build first)")
        return report
    tables = expected_tables(chapters)
    server, base = serve(site)
    driver = make_driver()
    tabs_seen = 0
    try:
        for rel in pages:
            url_path = rel.removesuffix("index.html")
            driver.get(base + rel)
            wait_loaded(driver)
            check_resources(driver, base, rel, report)
            check_tabs(driver, rel, tabs_seen == 0, report)
            tabs_seen += bool(tab_state(driver))
            if url_path in tables:
                check_tables(driver, rel, tables.pop(url_path), require, report)
            for message in console_errors(driver):
                report.fail(rel, f"console error: {message}")
            if screenshots is not None:
                screenshots.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(screenshots / (rel.replace("/", "_") + ".png")))
    finally:
        driver.quit()
        server.shutdown()
    for url_path, groups in tables.items():
        report.fail(url_path or "index", f"page not built, expected tables {groups}")
    if tabs_seen == 0:
        report.fail(str(site), f"no page has twin tabs labelled {NAIVE!r} and {OPTIMIZED!r}")
    report.notes.append(f"{len(pages)} page(s) checked, {tabs_seen} with twin tabs")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, nargs="?", default=ROOT / "site")
    parser.add_argument("--chapters", type=Path, default=ROOT / "chapters")
    parser.add_argument("--timeout", type=float, default=300.0, help="whole run, seconds")
    parser.add_argument("--require-measurements", action="store_true",
                        help="fail on a 'no measurements yet' placeholder table")
    parser.add_argument("--screenshots", type=Path, help="save a PNG of every page here")
    args = parser.parse_args(argv)
    if not args.site.is_dir():
        print(f"browser_check: {args.site} is not a directory (run mkdocs build)", file=sys.stderr)
        return 2

    def watchdog() -> None:
        time.sleep(args.timeout)
        print(f"browser_check: FAILED: gave up after {args.timeout:.0f} s", file=sys.stderr)
        os._exit(3)  # the browser may be wedged: leave without waiting for it

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        report = run(args.site.resolve(), args.chapters.resolve(), args.require_measurements,
                     args.screenshots)
    except WebDriverException as exc:
        print(f"browser_check: FAILED: the browser could not run: {exc.msg}", file=sys.stderr)
        return 2
    for note in report.notes:
        print(f"browser_check: {note}")
    if report.failures:
        for failure in report.failures:
            print(f"browser_check: FAIL {failure}", file=sys.stderr)
        print(f"browser_check: FAILED ({len(report.failures)} problem(s))", file=sys.stderr)
        return 1
    print("browser_check: all pages OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
