"""mt serve's page (mt/serve/page.html) in a real headless browser: Chromium and its WebDriver
from the system's packages (scripts/test.sh installs them where it can), driven by Selenium, at
a phone's width. Skipped, saying why, where there is no Chromium.

MT_SCREENSHOT=docs/serve.png saves the page as the test leaves it (the README's picture).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest

from benchmarks.bench_serve import Client, Served
from conftest import ROOT, THREADS, TOY
from mt.memory import open_memory

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
PHONE = (412, 915)  # CSS pixels of a common phone screen
SENTENCE = "Yesterday we saw forty two red dogs."


@pytest.fixture(scope="module")
def chromium():
    """One browser for the module (starting one costs seconds); each test gets it reset."""
    if not (CHROMIUM.exists() and DRIVER.exists()):
        pytest.skip(f"no {CHROMIUM} and {DRIVER}: apt-get install chromium chromium-driver "
                    "(scripts/test.sh does where it can) to test the page in a browser")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)  # given, with the driver: nothing is downloaded
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(chromium):
    """The module's browser on a blank page, as a phone shows pages; each test's server has a
    port of its own, so no page's storage is another test's."""
    chromium.get("about:blank")
    phone(chromium, PHONE[1])
    return chromium


def phone(driver, height: int) -> None:
    """Show pages as a phone does: PHONE's width, touch-screen layout, 2 pixels a CSS pixel.
    (A headless window cannot be made that narrow, nor taller than its screen.)"""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE[0], "height": height, "deviceScaleFactor": 2, "mobile": True})


def test_the_page_translates_and_draws_the_attention(tiny_run, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 120)
    shutil.copytree(tiny_run, tmp_path / "runs" / "toy")  # served as a user's runs/toy
    with Served("runs/toy", env=THREADS, cwd=tmp_path) as served:
        [want] = Client(served.url).translate([SENTENCE], attention=True)
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_element(By.ID, "beam").get_attribute("value"))  # /info read
        # the run's name, not where it is on the host
        assert browser.find_element(By.ID, "model").text.startswith("en → de: toy (step ")
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_element(By.ID, "translation").text)
        assert browser.find_element(By.ID, "translation").text == want["text"]
        canvas = browser.find_element(By.ID, "heatmap")
        wait.until(lambda d: canvas.get_attribute("data-drawn") == "true")
        # The cells (pixels bluer than grey: not the labels) fill much of the canvas, and the
        # strongest weights are dark.
        blue, dark, total = browser.execute_script("""
            const c = arguments[0], px = c.getContext("2d").getImageData(0, 0, c.width,
                                                                        c.height).data;
            let blue = 0, dark = 0;
            for (let k = 0; k < px.length; k += 4) {
              if (px[k + 2] > px[k] + 5) blue++;
              if (px[k + 2] > px[k] + 50 && px[k] < 100) dark++;
            }
            return [blue, dark, c.width * c.height];""", canvas)
        assert 0.15 < blue / total < 0.95 and dark > 0, (blue, dark, total)
        att = want["attention"]
        assert canvas.size["height"] >= 16 * len(att["out_tokens"])  # a row per output token
        # labelled with the words as a reader sees them: "dogs" and ".", not "dogs" and "￭."
        label = canvas.get_attribute("aria-label")
        assert label.endswith("source Yesterday we saw forty two red dogs ."), label
        assert "\uffed" not in label and "\u00b7" not in label
        # usable on the phone: nothing wider than its screen
        width = browser.execute_script("return [document.documentElement.scrollWidth, "
                                       "window.innerWidth]")
        assert width[0] <= width[1], width
        shot = os.environ.get("MT_SCREENSHOT")
        if shot:  # the whole page, at the phone's width
            phone(browser, browser.execute_script("return document.body.scrollHeight"))
            browser.save_screenshot(str(ROOT / shot))
            phone(browser, PHONE[1])
        browser.find_element(By.ID, "source").send_keys("\nToday you have eight cats.")
        browser.find_element(By.ID, "translate").click()  # two lines: both, and no heatmap
        wait.until(lambda d: "\n" in d.find_element(By.ID, "translation").text)
        assert not browser.find_element(By.ID, "attention").is_displayed()
        assert served.stop() == 0


def test_the_glossary_box_keeps_its_terms_and_lists_them(tiny_run, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 120)
    with Served(str(tiny_run), env=THREADS, cwd=tmp_path) as served:
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_element(By.ID, "beam").get_attribute("value"))
        page = {k: browser.find_element(By.ID, k) for k in ("source", "beam", "glossary",
                                                             "translate", "status")}
        browser.find_element(By.CSS_SELECTOR, "#glossarybox summary").click()
        page["glossary"].send_keys("dogs")  # no separator: refused on the page, nothing sent
        page["source"].send_keys(SENTENCE)
        page["translate"].click()
        assert page["status"].text == "glossary line 1: write source term = target term"
        page["glossary"].send_keys(" = Vögel\n# a comment\ncats = Katzen")
        page["beam"].clear()
        page["beam"].send_keys("3")
        page["translate"].click()
        wait.until(lambda d: d.find_element(By.ID, "translation").text)
        [want] = Client(served.url).translate([SENTENCE], beam=3, glossary=[["dogs", "Vögel"],
                                                                            ["cats", "Katzen"]])
        assert browser.find_element(By.ID, "translation").text == want["text"]
        assert "Vögel" in want["text"] and want["missing"] == []
        items = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#termlist li")]
        assert items == ["dogs → Vögel: kept"]  # cats: not in the sentence, not active
        # a server without a memory: nothing to save a correction into
        assert not browser.find_element(By.ID, "save").is_displayed()
        assert browser.find_element(By.ID, "translation").get_attribute(
            "contenteditable") == "false"
        assert served.stop() == 0


def test_the_page_shades_the_words_the_model_was_unsure_of(tiny_run, browser, tmp_path):
    """A word the toy model never saw ("zebras") leaves it unsure of some output words: those
    below the page's 0.5 are shaded, darker the less sure, the others not, each with its
    probability as the API gives it (`"confidence": true`)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 120)
    odd = "Yesterday zebras bought forty two red dogs."
    with Served(str(tiny_run), env=THREADS, cwd=tmp_path) as served:
        [want] = Client(served.url).translate([odd], confidence=True)
        words = want["words"]
        assert [w for w, _ in words] == want["text"].split()
        unsure = [w for w, p in words if p < 0.5]
        assert unsure and len(unsure) < len(words), words  # some words each way
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_element(By.ID, "beam").get_attribute("value"))
        assert not browser.find_element(By.ID, "legend").is_displayed()
        browser.find_element(By.ID, "source").send_keys(odd)
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#translation .word"))
        assert browser.find_element(By.ID, "translation").text == want["text"]
        spans = browser.execute_script("""
            return [...document.querySelectorAll("#translation .word")].map((s) => [
              s.textContent, Number(s.dataset.p), s.classList.contains("unsure"),
              getComputedStyle(s).backgroundColor]);""")
        assert [(w, p) for w, p, _, _ in spans] == [(w, pytest.approx(p)) for w, p in words]
        alpha = {}
        for word, p, shaded, colour in spans:
            assert shaded == (p < 0.5), (word, p)
            # transparent where sure; a red of more opacity the less sure
            assert (colour == "rgba(0, 0, 0, 0)") != shaded, (word, colour)
            if shaded:
                alpha[p] = float(colour.rstrip(")").split(",")[3])
        ps = sorted(alpha)
        assert all(alpha[a] >= alpha[b] for a, b in zip(ps, ps[1:])), alpha  # darker: less sure
        assert browser.find_element(By.ID, "legend").is_displayed()
        assert "confidence" not in browser.find_element(By.ID, "status").text  # uncalibrated
        assert served.stop() == 0


def blob_text(browser, element) -> str:
    """The text of the file a link offers for download (its blob: URL), read in the page."""
    return browser.execute_async_script("""
        const [link, done] = arguments;
        fetch(link.href).then((r) => r.text()).then(done);""", element)


def test_the_page_translates_a_file_and_copies_a_translation(tiny_run, browser, tmp_path):
    """The Document box sends a file to POST /translate/document in the format its name says,
    with the beam box's beam and the glossary box's entries, and offers the answer as a
    download; the Copy button copies the translation (the clipboard API, else a selection);
    /docs shows the API from this server's own files."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 120)
    notes = tmp_path / "notes.md"
    notes.write_text("# Dogs\n\nYesterday we saw forty two red dogs. Today you have eight "
                     "cats.\n", encoding="utf-8")
    odd = tmp_path / "notes.pdf"
    odd.write_bytes(b"%PDF-1.4")
    with Served(str(tiny_run), env=THREADS, cwd=tmp_path) as served:
        status, want = Client(served.url).request(
            "POST", "/translate/document?format=md&beam=3&glossary=" +
            quote(json.dumps([["dogs", "Vögel"]])), notes.read_bytes())
        assert status == 200 and "Vögel" in want
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_element(By.ID, "beam").get_attribute("value"))
        page = {k: browser.find_element(By.ID, k) for k in (
            "file", "translatefile", "download", "status", "beam", "glossary", "formats")}
        browser.find_element(By.CSS_SELECTOR, "#documentbox summary").click()
        assert (".html, .htm, .xhtml, .md, .markdown, .srt, .docx, .po, .pot, .xlf, .xliff)"
            in page["formats"].text)
        page["file"].send_keys(str(odd))
        page["translatefile"].click()
        assert page["status"].text.startswith("notes.pdf: not a format this server reads; "
                                              "give .txt, .text, .html")
        browser.find_element(By.CSS_SELECTOR, "#glossarybox summary").click()
        page["glossary"].send_keys("dogs = Vögel")
        page["beam"].clear()
        page["beam"].send_keys("3")
        page["file"].send_keys(str(notes))  # one file: this one replaces the other
        page["translatefile"].click()
        wait.until(lambda d: page["download"].is_displayed())
        assert page["download"].get_attribute("download") == "notes.de.md"
        assert page["download"].text == "Download notes.de.md"
        assert blob_text(browser, page["download"]) == want
        assert page["status"].text.startswith("notes.md: 3 sentence(s), ")

        copy = browser.find_element(By.ID, "copy")
        assert not copy.is_displayed()  # nothing to copy yet
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda d: copy.is_displayed())
        text = browser.find_element(By.ID, "translation").text
        # the clipboard itself is the desktop's: what the page hands it is recorded instead
        browser.execute_script("""
            navigator.clipboard.writeText = async (t) => { window.copied = ["api", t]; };""")
        copy.click()
        wait.until(lambda d: d.execute_script("return window.copied"))
        assert browser.execute_script("return window.copied") == ["api", text]
        assert copy.text == "Copied"
        browser.execute_script("""  // http from another host: no clipboard API
            Object.defineProperty(navigator, "clipboard", { value: undefined });
            document.execCommand = (command) => {
              window.copied = [command, document.querySelector("textarea[readonly]").value];
              return true; };""")
        wait.until(lambda d: copy.text == "Copy")
        copy.click()
        wait.until(lambda d: d.execute_script("return window.copied[0]") == "copy")
        assert browser.execute_script("return window.copied") == ["copy", text]

        browser.get(served.url + "/docs")  # Swagger UI, from this server alone
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock"))
        assert "/translate/document" in browser.find_element(By.ID, "swagger-ui").text
        loaded = browser.execute_script(
            "return performance.getEntriesByType('resource').map((e) => e.name)")
        assert loaded and all(u.startswith(served.url + "/") for u in loaded), loaded
        assert served.stop() == 0


def test_the_status_line_gives_the_confidence_not_the_score(run_copy, cli, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    from test_commands_calibrate import bad_refs

    r = cli("calibrate", str(run_copy), "--src", str(TOY / "toy.val.en"), "--ref",
            str(bad_refs(tmp_path)))
    assert r.code == 0, r.err
    wait = WebDriverWait(browser, 120)
    with Served(str(run_copy), env=THREADS, cwd=tmp_path) as served:
        [want] = Client(served.url).translate([SENTENCE], confidence=True)
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_element(By.ID, "beam").get_attribute("value"))
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "translate").click()
        status = browser.find_element(By.ID, "status")
        wait.until(lambda d: "ms" in status.text)
        assert re.fullmatch(rf"confidence {want['confidence']:.2f}, \d+ ms( \(look again: .*\))?",
                            status.text), status.text
        assert "score" not in status.text
        browser.find_element(By.ID, "source").send_keys("\nToday you have eight cats.")
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda d: status.text.startswith("2 lines, least confidence 0."))
        assert served.stop() == 0


def test_the_pair_picker_routes_each_translation(tiny_run, reverse_run, browser, tmp_path):
    """A server of two pairs (--model): the page lists them, and what it translates is the
    picked pair's translation, as mt's own API gives it for that source and target."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(browser, 120)
    german = "Heute hast du acht Katzen."
    with Served(None, "--model", f"en-de={tiny_run}", "--model", f"de-en={reverse_run}",
                env=THREADS, cwd=tmp_path) as served:
        client = Client(served.url)
        want = {pair: client.translate([line], source=pair[:2], target=pair[3:])[0]["text"]
                for pair, line in (("en-de", SENTENCE), ("de-en", german))}
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_element(By.ID, "pairfield").is_displayed())
        picker = Select(browser.find_element(By.ID, "pair"))
        assert [o.get_attribute("value") for o in picker.options] == ["en|de", "de|en"]
        assert browser.find_element(By.ID, "model").text == "2 language pairs"
        for value, pair, line in (("de|en", "de-en", german), ("en|de", "en-de", SENTENCE)):
            picker.select_by_value(value)
            source = browser.find_element(By.ID, "source")
            source.clear()
            source.send_keys(line)
            # emptied, so that the wait below is for this pair's answer, not the last one
            browser.execute_script("document.getElementById('translation').textContent = ''")
            browser.find_element(By.ID, "translate").click()
            wait.until(lambda d: d.find_element(By.ID, "translation").text)
            assert browser.find_element(By.ID, "translation").text == want[pair], pair
        assert want["en-de"] != want["de-en"]
        assert served.stop() == 0


def test_an_edited_translation_saved_on_the_page_is_what_the_memory_gives_next(
        tiny_run, browser, tmp_path):
    """With `mt serve --memory`, the translation is editable and Save posts the edited line
    to POST /corrections: translating the sentence again gives the person's translation,
    with its match (100%) shown above it. (A server without a memory offers no Save: the
    glossary test's server checks it.)"""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 120)
    person = "Gestern sahen wir zweiundvierzig rote Hunde."
    with Served(str(tiny_run), "--memory", "tm.db", env=THREADS, cwd=tmp_path) as served:
        browser.get(served.url + "/")
        wait.until(lambda d: d.find_element(By.ID, "beam").get_attribute("value"))
        page = {k: browser.find_element(By.ID, k) for k in (
            "source", "translate", "translation", "save", "status", "matches")}
        page["source"].send_keys(SENTENCE)
        page["translate"].click()
        wait.until(lambda d: page["translation"].text)
        machine = page["translation"].text
        assert machine != person and not page["matches"].is_displayed()
        page["save"].click()  # nothing edited: nothing sent
        assert page["status"].text == "edit the translation first, then save"
        page["translation"].click()
        page["translation"].send_keys(Keys.CONTROL, "a")
        page["translation"].send_keys(person)
        page["save"].click()
        wait.until(lambda d: page["status"].text.startswith("saved"))
        assert page["status"].text == "saved 1 correction(s) in the translation memory"
        page["translate"].click()
        wait.until(lambda d: page["matches"].is_displayed())
        assert page["translation"].text == person
        assert page["matches"].text == f"memory 100%: {SENTENCE} → {person}"
        assert served.stop() == 0
    with open_memory(tmp_path / "tm.db") as memory:
        assert list(memory.pairs()) == [(SENTENCE, person)]
