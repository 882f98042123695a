// Opens one page in a real headless Chromium (npm @sparticuz/chromium + puppeteer-core) and prints what the test
// asked about it as one JSON line. Usage: node browser_page.mjs SPEC, where SPEC is JSON:
//   {"url": ..., "width": 1280, "height": 900, "timeout_ms": 60000,
//    "steps": [{"wait_text": "..."} | {"wait_selector": "..."} | {"click_text": "..."} | {"eval": "js expression"}]}
// Each "eval" step's value is added to the printed "values" list; console errors of the page are in "errors".
import chromium from '@sparticuz/chromium';
import puppeteer from 'puppeteer-core';

const spec = JSON.parse(process.argv[2]);
const timeout = spec.timeout_ms ?? 60000;
chromium.setGraphicsMode = false;
const browser = await puppeteer.launch({
  // A locale the page's Intl can read (the machine's may be C or POSIX, which Chromium passes on as en-US@posix).
  args: [...chromium.args, '--lang=en-US'],
  env: { ...process.env, LANG: 'en_US.UTF-8', LANGUAGE: 'en_US', LC_ALL: 'en_US.UTF-8' },
  executablePath: await chromium.executablePath(),
  headless: 'shell',
  defaultViewport: { width: spec.width ?? 1280, height: spec.height ?? 900 },
});
const errors = [];
const values = [];
try {
  const page = await browser.newPage();
  page.on('pageerror', (error) => errors.push(String(error)));
  page.on('console', (message) => { if (message.type() === 'error') errors.push(message.text()); });
  await page.goto(spec.url, { waitUntil: 'networkidle0', timeout });
  for (const step of spec.steps ?? []) {
    if (step.wait_text !== undefined) {
      await page.waitForFunction((text) => document.body && document.body.innerText.includes(text),
        { timeout }, step.wait_text);
    } else if (step.wait_selector !== undefined) {
      await page.waitForSelector(step.wait_selector, { timeout });
    } else if (step.click_text !== undefined) {
      await page.waitForFunction((text) => [...document.querySelectorAll('a, button, [role=tab], td, div, span')]
        .some((e) => e.innerText && e.innerText.trim() === text), { timeout }, step.click_text);
      await page.evaluate((text) => {
        const found = [...document.querySelectorAll('a, button, [role=tab], td, div, span')]
          .filter((e) => e.innerText && e.innerText.trim() === text);
        found[found.length - 1].click();
      }, step.click_text);
    } else if (step.eval !== undefined) {
      values.push(await page.evaluate(step.eval));
    }
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify({ values, errors }));
