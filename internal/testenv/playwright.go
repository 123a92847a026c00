package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PlaywrightRun is what the Playwright checkout script reports.
type PlaywrightRun struct {
	// Actions are the API calls the script made while tracing that are
	// steps of the trace, in order, by their API name ("page.goto",
	// "locator.fill"…). Getters it made (locator.textContent) are not
	// listed: the importer makes no step of them.
	Actions []string `json:"actions"`
	// Shown is the text the page showed after paying.
	Shown string `json:"shown"`
	// Browser is the browser's version, Playwright playwright-core's.
	Browser    string `json:"browser"`
	Playwright string `json:"playwright"`
	// Bearer is the token every request carried in its Authorization
	// header (random per run); Cookie the value of the session cookie the
	// storefront set at sign-in. Both are in the trace.
	Bearer string `json:"bearer"`
	Cookie string `json:"cookie"`
}

// MinNodeMajor is the oldest Node.js the pinned playwright-core runs on
// (its package.json's engines); .ci/run checks the same.
const MinNodeMajor = 20

// PlaywrightDir is internal/testenv/playwright: its package.json pins
// playwright-core, its checkout.js records the trace.
func PlaywrightDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "playwright")
}

// PlaywrightCheckout runs internal/testenv/playwright/checkout.js with
// node: playwright-core drives Debian's Chromium (see ChromiumPath; no
// browser download) through the demo storefront at base — sign in, add to
// cart, check out with the gift card applied, pay — with tracing on
// (screenshots and snapshots) and a bearer token on every request, and
// writes the trace zip into a t.TempDir.
// It returns the zip's path and what the script reports.
//
// Without node (MinNodeMajor or newer), playwright-core (npm ci --prefix
// internal/testenv/playwright) or a browser, the test is skipped on a
// developer's machine and fails in CI (CI set).
func PlaywrightCheckout(t testing.TB, base string) (zip string, run PlaywrightRun) {
	t.Helper()
	dir := PlaywrightDir()
	node, browser := requirePlaywright(t, "playwright-core")
	zip = filepath.Join(t.TempDir(), "trace.zip")
	// A guard against a hung browser, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "checkout.js"), base, zip)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+browser, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node checkout.js: %v\n%s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &run); err != nil {
		t.Fatalf("node checkout.js printed no report: %v: %s\n%s", err, stdout.String(), stderr.String())
	}
	return zip, run
}

// requirePlaywright finds node (MinNodeMajor or newer), the npm package
// pkg installed in PlaywrightDir and Debian's Chromium, and returns node's
// and the browser's paths. Without them the test is skipped on a
// developer's machine and fails in CI (CI set).
func requirePlaywright(t testing.TB, pkg string) (node, browser string) {
	t.Helper()
	dir := PlaywrightDir()
	missing := func(msg string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing(fmt.Sprintf("node not found on $PATH (install Node.js %d or newer, then npm ci --prefix internal/testenv/playwright)", MinNodeMajor))
	}
	// Debian's nodejs is 18: playwright-core would fail to load on it.
	if v, err := exec.Command(node, "--version").Output(); err != nil {
		missing(fmt.Sprintf("node --version: %v", err))
	} else if major, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(strings.TrimSpace(string(v)), ".", 2)[0], "v")); major < MinNodeMajor {
		missing(fmt.Sprintf("node is %s; playwright-core needs Node.js %d or newer", strings.TrimSpace(string(v)), MinNodeMajor))
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
		missing(pkg + " is not installed: run npm ci --prefix internal/testenv/playwright")
	}
	browser, ok := ChromiumPath()
	if !ok {
		missing("Chromium not found at " + browser + " (set $CHROMIUM, or apt-get install chromium)")
	}
	return node, browser
}

// PlaywrightTestResult is how npx playwright test ran one spec file.
type PlaywrightTestResult struct {
	// Status is the test's: "passed", "failed", "timedOut"…
	Status string
	// FailedStep is the title of the test.step that failed, "" when none
	// did; Error is the test's error message.
	FailedStep string
	Error      string
	Output     string // what playwright printed, for failure messages
}

// RunPlaywrightTest runs one Playwright Test spec (a file in a directory
// of its own) with npx playwright test and @playwright/test from
// PlaywrightDir, on Debian's Chromium ($CHROMIUM for the spec; no browser
// download), with env added to the environment, and reads its JSON report.
// Skipped or failed as PlaywrightCheckout says without node, the package
// or a browser.
func RunPlaywrightTest(t testing.TB, spec string, env ...string) PlaywrightTestResult {
	t.Helper()
	_, browser := requirePlaywright(t, "@playwright/test")
	dir := filepath.Dir(spec)
	// The spec imports @playwright/test: resolve it from here.
	link := filepath.Join(dir, "node_modules")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(filepath.Join(PlaywrightDir(), "node_modules"), link); err != nil {
			t.Fatal(err)
		}
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatal("npx not found beside node: " + err.Error())
	}
	report := filepath.Join(t.TempDir(), "report.json")
	// A guard against a hung browser, not a timed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npx, "--no-install", "playwright", "test", filepath.Base(spec), "--reporter=json", "--workers=1")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CHROMIUM="+browser, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1",
		"PLAYWRIGHT_JSON_OUTPUT_NAME="+report), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // a failing test exits 1: the report says how it ran
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("npx playwright test %s wrote no report: %v\n%s", spec, err, out.String())
	}
	var rep pwReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("playwright's JSON report: %v", err)
	}
	res := PlaywrightTestResult{Output: out.String()}
	var walk func(ss []pwSuite)
	walk = func(ss []pwSuite) {
		for _, s := range ss {
			for _, sp := range s.Specs {
				for _, tt := range sp.Tests {
					for _, r := range tt.Results {
						res.Status = r.Status
						if r.Error != nil {
							res.Error = r.Error.Message
						}
						res.FailedStep = failedStep(r.Steps)
					}
				}
			}
			walk(s.Suites)
		}
	}
	walk(rep.Suites)
	if res.Status == "" {
		t.Fatalf("playwright ran no test in %s:\n%s", spec, out.String())
	}
	return res
}

type pwReport struct {
	Suites []pwSuite `json:"suites"`
}

type pwSuite struct {
	Specs []struct {
		Tests []struct {
			Results []struct {
				Status string   `json:"status"`
				Error  *pwError `json:"error"`
				Steps  []pwStep `json:"steps"`
			} `json:"results"`
		} `json:"tests"`
	} `json:"specs"`
	Suites []pwSuite `json:"suites"`
}

type pwError struct {
	Message string `json:"message"`
}

type pwStep struct {
	Title string   `json:"title"`
	Error *pwError `json:"error"`
}

// failedStep is the title of the first top-level step (a test.step of
// the spec) that failed.
func failedStep(steps []pwStep) string {
	for _, s := range steps {
		if s.Error != nil {
			return s.Title
		}
	}
	return ""
}
