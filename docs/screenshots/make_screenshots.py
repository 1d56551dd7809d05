"""Regenerate the report screenshots in this folder (headless Chromium + selenium, offline).

    python docs/screenshots/make_screenshots.py

The pages are built from the same fixtures as tests/core/test_html_report.py (a trajectory, a two-version memory and a
two-method comparison), written with `memento report`, and photographed at 1280 px wide.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))

from core.test_html_report import CHROMEDRIVER, CHROMIUM, make_compare, make_memory, make_trajectory  # noqa: E402
from selenium import webdriver  # noqa: E402

from memento.records.html_report import write_report  # noqa: E402


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="memento-shots-"))
    run = work / "run.json"
    run.write_text(make_trajectory().model_dump_json(), encoding="utf-8")
    pages = {
        "report-trajectory.png": write_report(run),
        "report-memory.png": write_report(make_memory(work / "mem")),
        "report-compare.png": write_report(make_compare(work / "cmp")),
    }
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                "--window-size=1280,1000", f"--user-data-dir={work / 'profile'}"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        for name, page in pages.items():
            driver.get(page.as_uri())
            driver.execute_script("setAll(true)")
            height = driver.execute_script("return document.body.scrollHeight")
            driver.set_window_size(1280, min(max(height + 40, 600), 2400))
            driver.save_screenshot(str(HERE / name))
            print(f"wrote {HERE / name}")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
