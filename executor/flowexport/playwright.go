package flowexport

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/flightrec/flightrec/executor/flow"
)

// Playwright writes the export as a Playwright Test spec (TypeScript,
// @playwright/test): a test.step per recorded step, getByRole locators
// (CSS only where the recording had no accessible name), expect for UI
// checks, page.request calls with expect for state checks, masked values
// from environment variables. It asserts what the run should have done:
// the steps up to the first failed one, where every request that failed
// in the recording must answer without a server error, so it fails where
// the recording failed until the bug is fixed, and passes on the fix. What
// the recording showed after that failure is the broken behaviour: it is
// listed in comments, not asserted. It launches Debian's Chromium
// ($CHROMIUM, else /usr/bin/chromium), so no browser is downloaded.
func (x *Export) Playwright() []byte {
	var b bytes.Buffer
	x.header(&b, "// ", func(p Param) string { return p.Env }, func(p Param) string {
		return "environment variable " + p.Env + " (process.env." + p.Env + ")"
	})
	var env []string
	for _, p := range x.Params {
		env = append(env, p.Env+"=…")
	}
	fmt.Fprintf(&b, "// Recorded against %s; BASE_URL points the test at another build.\n", orUnknown(x.Origin))
	fmt.Fprintf(&b, "// Run: BASE_URL=http://HOST:PORT %snpx playwright test %s.spec.ts\n", strings.Join(append(env, ""), " "), x.Rec.ID)
	if x.FailedAt >= 0 {
		b.WriteString("// It asserts the steps up to the first failed one and that the requests that failed there answer\n" +
			"// without a server error: it fails there until the bug is fixed. The recording's later steps are listed, not asserted.\n")
	}
	if x.switches() {
		b.WriteString("import { test, expect, type Page } from '@playwright/test';\n\n")
	} else {
		b.WriteString("import { test, expect } from '@playwright/test';\n\n")
	}
	fmt.Fprintf(&b, "const BASE_URL = (process.env.BASE_URL ?? %s).replace(/\\/+$/, '');\n\n", jsStr(orUnknown(x.Origin)))
	if len(x.Params) > 0 {
		b.WriteString("// param is a value the recording masked, from the environment.\n" +
			"function param(name: string, value: string | undefined): string {\n" +
			"  if (value === undefined) {\n" +
			"    throw new Error(`set the environment variable ${name}: the recording masked this value (see the header)`);\n" +
			"  }\n  return value;\n}\n\n")
	}
	if x.switches() {
		b.WriteString("// closable acts on a popup whose action may close it (a Close button calling\n" +
			"// window.close()): the page closing is then the action's result, not a failure.\n" +
			"async function closable(p: Page, action: () => Promise<unknown>): Promise<void> {\n" +
			"  try {\n    await action();\n  } catch (e) {\n    if (!p.isClosed()) throw e;\n  }\n}\n\n")
	}
	if x.usesPattern() {
		b.WriteString("function escapeRegExp(s: string): string {\n  return s.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&');\n}\n\n")
	}
	fmt.Fprintf(&b, "test.use({\n  baseURL: BASE_URL,\n  viewport: { width: %d, height: %d },\n"+
		"  launchOptions: { executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium' },\n});\n\n", x.Viewport.Width, x.Viewport.Height)
	fmt.Fprintf(&b, "test(%s, async ({ page }) => {\n", jsStr(fmt.Sprintf("%s (recording %s)", x.Name, x.Rec.ID)))
	b.WriteString("  const pageErrors: string[] = [];\n  page.on('pageerror', (e) => pageErrors.push(e.message));\n")
	if x.switches() {
		// A switch step moves page to a popup and back: the first is kept.
		b.WriteString("  const firstPage = page;\n")
	}
	if x.StartURL != "" {
		fmt.Fprintf(&b, "  await test.step(%s, async () => {\n    await page.goto(%s);\n  });\n", jsStr("start: goto "+x.StartURL), x.jsURL(x.StartURL, ""))
	}
	for i, s := range x.Steps {
		title := fmt.Sprintf("step %d: %s", s.Rec, s.Action)
		if x.FailedAt >= 0 && i > x.FailedAt {
			if i == x.FailedAt+1 {
				b.WriteString("  // Recorded after the failure (the broken run's behaviour), not asserted:\n")
			}
			fmt.Fprintf(&b, "  //   %s\n", comment(title))
			continue
		}
		if s.Flow == nil {
			fmt.Fprintf(&b, "  // %s: not exported: %s\n", comment(title), comment(s.Note))
			continue
		}
		if s.Failed {
			fmt.Fprintf(&b, "  // Failed in the recording: %s: %s\n", comment(s.ErrCode), comment(s.ErrMsg))
		}
		fmt.Fprintf(&b, "  await test.step(%s, async () => {\n", jsStr(title))
		x.stepTS(&b, i, s)
		b.WriteString("  });\n")
	}
	b.WriteString("});\n")
	return b.Bytes()
}

func (x *Export) usesPattern() bool {
	for i, s := range x.Steps {
		if (x.FailedAt < 0 || i <= x.FailedAt) && s.Flow != nil && s.Flow.Wait != nil && strings.Contains(s.Flow.Wait.URL, "*") {
			return true
		}
	}
	return false
}

// stepTS writes one step's statements.
func (x *Export) stepTS(b *bytes.Buffer, i int, s Step) {
	fs := s.Flow
	const in = "    "
	act := func(stmt string) {
		if !s.Failed || len(s.FailedRequests) == 0 {
			b.WriteString(in + stmt + "\n")
			return
		}
		// The requests that failed here must now answer without a
		// server error: wait for each while acting.
		for k, q := range s.FailedRequests {
			fmt.Fprintf(b, "%sconst answer%d = page.waitForResponse((r) => r.request().method() === %s && new URL(r.url()).pathname === %s);\n",
				in, k+1, jsStr(q.Method), jsStr(strings.SplitN(q.Path, "?", 2)[0]))
		}
		b.WriteString(in + stmt + "\n")
		for k, q := range s.FailedRequests {
			was := fmt.Sprintf("%d", q.Status)
			if q.Status == 0 {
				was = "no answer"
			}
			if x.Rec.Signature != "" {
				was += " (" + x.Rec.Signature + ")"
			}
			fmt.Fprintf(b, "%sconst r%d = await answer%d;\n", in, k+1, k+1)
			fmt.Fprintf(b, "%sconst body%d = r%d.status() >= 500 ? (await r%d.text().catch(() => '')).trim() : '';\n", in, k+1, k+1, k+1)
			fmt.Fprintf(b, "%sexpect(r%d.status(), `%s %s answered ${r%d.status()} ${body%d}; the recording's answer was %s`).toBeLessThan(500);\n",
				in, k+1, tmplStr(q.Method), tmplStr(strings.SplitN(q.Path, "?", 2)[0]), k+1, k+1, tmplStr(was))
		}
	}
	switch fs.Verb {
	case flow.Goto:
		act(fmt.Sprintf("await page.goto(%s);", x.jsURL(fs.URL, s.Param)))
	case flow.Click:
		if x.onPopup(i) {
			// window.close() in the click's handler can close the page
			// before Playwright has the click's answer.
			act(fmt.Sprintf("await closable(page, () => %s.click());", locator(fs.Target)))
		} else {
			act(fmt.Sprintf("await %s.click();", locator(fs.Target)))
		}
	case flow.Check:
		act(fmt.Sprintf("await %s.check();", locator(fs.Target)))
	case flow.Fill:
		act(fmt.Sprintf("await %s.fill(%s);", locator(fs.Target), x.jsValue(fs.Value, s.Param)))
	case flow.Select:
		act(fmt.Sprintf("await %s.selectOption(%s);", locator(fs.Target), x.jsValue(fs.Value, s.Param)))
	case flow.Press:
		stmt := fmt.Sprintf("page.keyboard.press(%s)", jsStr(fs.Key))
		if fs.Target != nil {
			stmt = fmt.Sprintf("%s.press(%s)", locator(fs.Target), jsStr(fs.Key))
		}
		if x.onPopup(i) {
			act(fmt.Sprintf("await closable(page, () => %s);", stmt))
		} else {
			act("await " + stmt + ";")
		}
	case flow.Wait:
		switch w := fs.Wait; {
		case w.Text != "":
			act(fmt.Sprintf("await expect(page.locator('body')).toContainText(%s);", jsStr(w.Text)))
		case strings.Contains(w.URL, "*"):
			act(fmt.Sprintf("await page.waitForURL(%s);", x.jsPattern(w.URL)))
		case w.URL != "":
			act(fmt.Sprintf("await page.waitForURL(%s);", x.jsURL(w.URL, "")))
		default:
			act("await page.waitForLoadState('networkidle');")
		}
	case flow.Switch:
		if fs.Page == flow.PageMain {
			act("page = firstPage;")
		} else {
			act("await expect.poll(() => page.context().pages().filter((p) => !p.isClosed()).length).toBeGreaterThan(1);")
			act("page = page.context().pages().filter((p) => !p.isClosed()).at(-1)!;")
			act("await page.waitForLoadState();")
		}
	case flow.Snapshot:
		act("// the recording took a full accessibility snapshot here (flightrec's snapshot step)")
	case flow.Expect:
		if st := fs.Expect.State; st != nil {
			v := fmt.Sprintf("state%d", i+1)
			fmt.Fprintf(b, "%sconst %s = await page.request.fetch(%s, { method: %s });\n", in, v, x.jsURL(st.URL, ""), jsStr(st.Method))
			fmt.Fprintf(b, "%sexpect(%s.status(), %s).toBe(%d);\n", in, v, jsStr(st.Method+" "+st.URL), st.Status)
			if len(st.JSON) > 0 {
				fmt.Fprintf(b, "%sexpect(await %s.json()).toMatchObject(%s);\n", in, v, compactJSON(st.JSON))
			}
		} else {
			act(fmt.Sprintf("await expect(page.locator('body')).toContainText(%s);", jsStr(fs.Expect.Text)))
		}
	}
	if s.Failed && s.ErrCode == "PAGE_ERROR" {
		b.WriteString(in + "expect(pageErrors, 'uncaught exceptions in the page').toEqual([]);\n")
	}
}

// playwrightRoles maps Chromium's names for roles that Playwright spells
// otherwise.
var playwrightRoles = map[string]string{"image": "img"}

// switches says whether a step switches pages.
func (x *Export) switches() bool {
	for _, s := range x.Steps {
		if s.Flow != nil && s.Flow.Verb == flow.Switch {
			return true
		}
	}
	return false
}

// onPopup says whether step i acts on a popup: a switch to a popup came
// before it, with no switch back to the main page since.
func (x *Export) onPopup(i int) bool {
	for k := i - 1; k >= 0; k-- {
		if fs := x.Steps[k].Flow; fs != nil && fs.Verb == flow.Switch {
			return fs.Page != flow.PageMain
		}
	}
	return false
}

// locator is a target's Playwright locator; an element in a child frame
// is found through frameLocator, by the frame element's title or, for an
// origin, by its src.
func locator(t *flow.Target) string {
	scope := "page"
	if f := t.Frame; f != "" {
		sel := "iframe[title=" + strconv.Quote(f) + "]"
		if strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://") {
			sel = "iframe[src^=" + strconv.Quote(f+"/") + "]"
		}
		scope = "page.frameLocator(" + jsStr(sel) + ")"
	}
	if t.CSS != "" {
		return scope + ".locator(" + jsStr(t.CSS) + ")"
	}
	role := t.Role
	if r, ok := playwrightRoles[role]; ok {
		role = r
	}
	if t.Name == "" {
		return scope + ".getByRole(" + jsStr(role) + ")"
	}
	return fmt.Sprintf("%s.getByRole(%s, { name: %s, exact: true })", scope, jsStr(role), jsStr(t.Name))
}

// jsURL is a flow URL as a TypeScript expression: {{base}} is BASE_URL, a
// parameter its environment variable.
func (x *Export) jsURL(u, param string) string {
	if param != "" {
		return x.paramExpr(param)
	}
	if rest, ok := strings.CutPrefix(u, "{{base}}"); ok {
		return "BASE_URL + " + jsStr(rest)
	}
	return jsStr(u)
}

func (x *Export) jsValue(v, param string) string {
	if param != "" {
		return x.paramExpr(param)
	}
	return jsStr(v)
}

func (x *Export) paramExpr(name string) string {
	for _, p := range x.Params {
		if p.Name == name {
			return fmt.Sprintf("param(%s, process.env.%s)", jsStr(p.Env), p.Env)
		}
	}
	return jsStr("{{" + name + "}}")
}

// jsPattern is a wait URL with * (any run of characters) as a RegExp.
func (x *Export) jsPattern(u string) string {
	parts := strings.Split(u, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	src := strings.Join(parts, ".*")
	if rest, ok := strings.CutPrefix(src, regexp.QuoteMeta("{{base}}")); ok {
		return "new RegExp('^' + escapeRegExp(BASE_URL) + " + jsStr(rest+"$") + ")"
	}
	return "new RegExp(" + jsStr("^"+src+"$") + ")"
}

// jsStr is a TypeScript string literal (JSON's is one).
func jsStr(s string) string { return yq(s) }

// tmplStr escapes text for a template literal.
func tmplStr(s string) string {
	return strings.NewReplacer("\\", "\\\\", "`", "\\`", "${", "\\${").Replace(s)
}
