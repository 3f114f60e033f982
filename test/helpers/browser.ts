// Debian's headless Chromium, driven by puppeteer-core, for the admin port's /ui: a browser, and a page that
// records its script errors and Content-Security-Policy violations.
import fs from "node:fs";
import puppeteer, { type Browser, type Page } from "puppeteer-core";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => fs.existsSync(p));

export async function launchBrowser(): Promise<Browser> {
  if (!CHROMIUM) throw new Error("no chromium: apt-get install -y chromium (.ci/run installs it)");
  return puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
}

export interface WatchedPage {
  page: Page;
  /** Script errors and console errors (a script or style the policy blocks is said there: "Refused to ..."). */
  errors: string[];
  /** The directives of the securitypolicyviolation events the page saw. */
  violations(): Promise<string[]>;
}

export async function watchedPage(browser: Browser): Promise<WatchedPage> {
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(String(err)));
  page.on("console", (m) => m.type() === "error" && !m.location().url?.endsWith("/favicon.ico") && errors.push(m.text()));
  await page.evaluateOnNewDocument(() => {
    (window as unknown as { violations: string[] }).violations = [];
    document.addEventListener("securitypolicyviolation", (e) => (window as unknown as { violations: string[] }).violations.push(e.violatedDirective));
  });
  return { page, errors, violations: () => page.evaluate(() => (window as unknown as { violations: string[] }).violations) };
}
