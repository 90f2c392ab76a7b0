#!/usr/bin/python3
"""The HTML report (`hangtrace analyze --html`, and report.html of the
automatic report) in a real browser: Debian's chromium, headless, driven by
Selenium through chromedriver (all three installed by scripts/setup.sh).

Each page is opened from its file, offline, and checked through its DOM:
the verdict and the culprit the JSON report gives, the wait-for graph with
the culprit's class marked, a click on a class that lists its ranks, the
stack tree, and a screenshot that is not blank. The jobs: a simulated seed
hang (8 ranks), a simulated job of 16,384 ranks (the page stays under 5 MB
and usable), and a real traced job, the bundled trainer under mpirun with
the seed hang, whose automatic report writes report.html.

usage: test_html_report.py BUILD_DIR [case ...]   (cases: small big real)
exit 0 passed, 1 failed, 77 skipped (no chromium, chromedriver or selenium)
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
HANGTRACE = os.path.join(BUILD, "bin", "hangtrace")
TRAINER = os.path.join(BUILD, "bin", "hangtrace-trainer")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
failures = []


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
    return ok


try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:
    skip("python3-selenium is not installed (./scripts/setup.sh installs it)")
for path in (CHROMIUM, CHROMEDRIVER):
    if not os.access(path, os.X_OK):
        skip(path + " is not installed (./scripts/setup.sh installs chromium and chromium-driver)")


def browser():
    options = webdriver.ChromeOptions()
    # As root, chromium runs only without its sandbox.
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1800"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def analyze(paths, out_html, extra=()):
    r = subprocess.run([HANGTRACE, "analyze", *paths, "--html", out_html, *extra], capture_output=True, text=True)
    j = subprocess.run([HANGTRACE, "analyze", *paths, "--format", "json"], capture_output=True, text=True)
    check(r.returncode in (0, 3), "analyze --html ran (status %d): %s" % (r.returncode, r.stderr.strip()[-300:]))
    return json.loads(j.stdout)


def distinct_colours(driver):
    """The screenshot's distinct colours, counted by the browser itself from
    the PNG it took (a blank page has one)."""
    png = driver.get_screenshot_as_base64()
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const img = new Image();
        img.onload = () => {
          const c = document.createElement("canvas");
          c.width = img.width; c.height = img.height;
          const g = c.getContext("2d");
          g.drawImage(img, 0, 0);
          const px = g.getImageData(0, 0, c.width, c.height).data, seen = new Set();
          for (let i = 0; i < px.length && seen.size < 1000; i += 4 * 7) seen.add((px[i] << 16) | (px[i+1] << 8) | px[i+2]);
          done(seen.size);
        };
        img.onerror = () => done(-1);
        img.src = "data:image/png;base64," + arguments[0];""", png)


def check_page(driver, page, report, name):
    """What every page must show, against the JSON report of the same job."""
    check(os.path.getsize(page) < 5 * 1024 * 1024, "%s: the page is under 5 MB (%d bytes)" % (name, os.path.getsize(page)))
    with open(page, encoding="utf-8") as f:
        text = f.read()
    for external in ("http://", "https://", "src=\"//"):
        # The one URL a page may hold is SVG's namespace, which is a name, not a fetch.
        left = text.replace("http://www.w3.org/2000/svg", "")
        check(external not in left, "%s: nothing fetched from outside (%s)" % (name, external))
    driver.get("file://" + page)
    check(driver.execute_script("return document.body.dataset.ready") == "1", name + ": the script drew the page")
    errors = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "main > p.red")]
    check(not errors, name + ": every view drawn " + repr(errors))
    verdict = driver.find_element(By.CSS_SELECTOR, "#verdict .verdict").text.strip().lower()
    check(verdict == report["verdict"], "%s: the verdict %r is the JSON's %r" % (name, verdict, report["verdict"]))
    culprits = [int(e.get_attribute("data-rank")) for e in driver.find_elements(By.CSS_SELECTOR, "li.culprit")]
    want = [c["rank"] for c in report["culprits"]]
    check(culprits == want, "%s: the culprits %s are the JSON's %s" % (name, culprits, want))
    nodes = driver.find_elements(By.CSS_SELECTOR, "#graph g.node")
    check(len(nodes) >= 2, "%s: the wait-for graph has %d classes" % (name, len(nodes)))
    marked = driver.find_elements(By.CSS_SELECTOR, "#graph g.node.culprit")
    if want:
        check(any(("culprit: " in n.text or "culprit: " in (n.get_attribute("textContent") or "")) for n in marked),
              name + ": the culprit's class is marked in the graph")
    colours = distinct_colours(driver)
    check(colours > 20, "%s: the screenshot is not blank (%d colours)" % (name, colours))
    return driver


def click_class_with(driver, rank, name):
    """Clicks the class (a table row, then its graph node) that holds `rank`
    and checks that the ranks listed are that class's."""
    rows = driver.find_elements(By.CSS_SELECTOR, "#classes tr.class-row")
    classes = driver.execute_script("return DATA.classes.map(c => c.ranks)")
    def holds(ranges, r):
        for part in ranges.split(","):
            a, _, b = part.partition("-")
            if part and int(a) <= r <= int(b or a):
                return True
        return False
    index = next((i for i, c in enumerate(classes) if holds(c, rank)), None)
    if not check(index is not None, "%s: a class holds rank %d" % (name, rank)):
        return
    row = rows[index]
    if not row.is_displayed():
        driver.find_element(By.ID, "all-classes").click()
    row.click()
    panel = driver.find_element(By.ID, "class-ranks")
    listed = [int(e.text) for e in panel.find_elements(By.CSS_SELECTOR, "span.rank")]
    check(panel.is_displayed() and rank in listed, "%s: clicking its row lists rank %d among %d ranks" % (name, rank, len(listed)))
    check(all(holds(classes[index], r) for r in listed), name + ": every rank listed is of that class")
    count = driver.execute_script("return DATA.classes[arguments[0]].count", index)
    if count > len(listed):  # a class of thousands: the first ranks, then the rest as ranges
        check("more: " + classes[index] in panel.text, "%s: the %d ranks not listed one by one are named as ranges" %
              (name, count - len(listed)))
    node = driver.find_elements(By.CSS_SELECTOR, '#graph g.node[data-class="%d"]' % index)
    if node:
        # An SVG element takes the click through the page's script, as a mouse would.
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", node[0])
        check(panel.get_attribute("data-class") == str(index) and "selected" in node[0].get_attribute("class"),
              name + ": clicking its node in the graph selects it")


def case_small(driver, tmp):
    subprocess.run([HANGTRACE, "simulate", "--tp", "2", "--pp", "2", "--dp", "2", "--fault", "seed-hang@rank=3,step=2",
                    "--out", tmp + "/small"], check=True, capture_output=True)
    page = tmp + "/small.html"
    report = analyze([tmp + "/small/sim"], page)
    check_page(driver, page, report, "small")
    click_class_with(driver, 1, "small")
    check(bool(driver.find_elements(By.CSS_SELECTOR, "#tree details")), "small: the merged stack tree is drawn")
    cards = driver.find_elements(By.CSS_SELECTOR, "#ranks .rank-card")
    check(len(cards) == 8, "small: every rank's last calls (%d of 8)" % len(cards))
    culprit = driver.find_element(By.ID, "rank-3").text
    check("MPI_Allreduce #3" in culprit and "in flight" in culprit, "small: rank 3's last calls show its open all-reduce")


def case_big(driver, tmp):
    subprocess.run([HANGTRACE, "simulate", "--tp", "8", "--pp", "16", "--dp", "128", "--records", "200",
                    "--fault", "p2p-deadlock@rank=21,step=2", "--out", tmp + "/big"], check=True, capture_output=True)
    page = tmp + "/big.html"
    report = analyze([tmp + "/big/sim"], page)
    check_page(driver, page, report, "16384 ranks")
    click_class_with(driver, 130, "16384 ranks")
    click_class_with(driver, 21, "16384 ranks")
    shown = len(driver.find_elements(By.CSS_SELECTOR, "#ranks .rank-card"))
    check(0 < shown <= 264, "16384 ranks: details for the culprits and a rank per class only (%d)" % shown)


def case_real(driver, tmp):
    if not os.access(TRAINER, os.X_OK) or not shutil.which("mpirun"):
        check(False, "real: the trainer and mpirun are needed")
        return
    env = dict(os.environ, HANGTRACE_DIR=tmp + "/traces", HANGTRACE_REPORT="1", HANGTRACE_REPORT_DIR=tmp + "/report",
               HANGTRACE_TIMEOUT="2", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    log = open(tmp + "/job.out", "w")
    job = subprocess.Popen(["mpirun", "-np", "8", HANGTRACE, "run", TRAINER, "--tp", "2", "--pp", "2", "--dp", "2",
                            "--steps", "20", "--fault", "seed-hang@rank=3,step=3"],
                           stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        page = None
        for _ in range(600):
            found = [os.path.join(d, "report.html") for d, _, files in os.walk(tmp + "/report") if "report.html" in files]
            with open(tmp + "/job.out") as f:
                said = "hangtrace: the report: " in f.read()
            if found and said:
                page = found[0]
                break
            time.sleep(0.1)
        if not check(page is not None, "real: the automatic report wrote report.html"):
            print(open(tmp + "/job.out").read()[-3000:])
            return
        with open(os.path.join(os.path.dirname(page), "report.json")) as f:
            report = json.load(f)
        check([c["rank"] for c in report["culprits"]] == [3], "real: the report names rank 3")
        check_page(driver, page, report, "real")
        click_class_with(driver, 1, "real")
        user = driver.find_elements(By.CSS_SELECTOR, "#tree .f-user")
        check(any("trainer" in e.text.lower() or ".cc:" in e.text for e in user),
              "real: the trainer's own frames are set apart in the stack tree (%d)" % len(user))
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def main():
    cases = sys.argv[2:] or ["small", "big", "real"]
    tmp = tempfile.mkdtemp(prefix="hangtrace-html-")
    driver = browser()
    try:
        for name in cases:
            print("== " + name)
            globals()["case_" + name](driver, tmp)
    finally:
        driver.quit()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
