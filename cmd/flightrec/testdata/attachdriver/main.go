// attachdriver is a second CDP client for record --attach's tests: a
// chromedp program, in a process of its own, that drives the demo
// storefront in a running Chromium's first page.
//
//	attachdriver open CDP_URL BASE       loads BASE/signin and leaves the page open
//	attachdriver checkout CDP_URL BASE   signs in and pays with the gift card on that page
//
// It prints the actions it made, one "verb target" per line.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: attachdriver open|checkout CDP_URL BASE")
		os.Exit(2)
	}
	mode, endpoint, base := os.Args[1], os.Args[2], os.Args[3]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	allocCtx, cancelAlloc := remote.NewAllocator(ctx, endpoint)
	defer cancelAlloc()
	bctx, cancelB := chromedp.NewContext(allocCtx)
	defer cancelB()
	infos, err := chromedp.Targets(bctx)
	if err != nil {
		fail(err)
	}
	var page target.ID
	for _, ti := range infos {
		if ti.Type == "page" {
			page = ti.TargetID
			break
		}
	}
	if page == "" {
		fail(fmt.Errorf("the browser has no page"))
	}
	// Detach, never close: the page stays for the next client.
	tab, cancelTab := chromedp.NewContext(bctx, chromedp.WithTargetID(page), chromedp.WithDetachOnCancel())
	defer cancelTab()
	act := func(verb, target string, a ...chromedp.Action[chromedp.Void]) {
		if err := chromedp.Do(tab, a...); err != nil {
			fail(fmt.Errorf("%s %s: %w", verb, target, err))
		}
		if verb != "" {
			fmt.Println(verb + " " + target)
		}
	}
	switch mode {
	case "open":
		act("", "", chromedp.Navigate(base+"/signin"), chromedp.WaitVisible(chromedp.CSS("#email")))
	case "checkout":
		act("fill", `textbox "Email"`, chromedp.SendKeys(chromedp.CSS("#email"), "buyer@acme.example"))
		act("fill", `textbox "Password"`, chromedp.SendKeys(chromedp.CSS("#password"), "correct-horse-battery-staple"))
		act("click", `button "Sign in"`, chromedp.Click(chromedp.Search(`//button[normalize-space()="Sign in"]`)))
		act("", "", chromedp.WaitVisible(chromedp.Search(`//button[normalize-space()="Add to cart"]`)))
		act("click", `button "Add to cart"`, chromedp.Click(chromedp.Search(`//button[normalize-space()="Add to cart"]`)))
		act("", "", chromedp.WaitVisible(chromedp.Search(`//*[contains(text(),"Added to cart")]`)))
		act("click", `link "Checkout"`, chromedp.Click(chromedp.Search(`//a[normalize-space()="Checkout"]`)))
		act("", "", chromedp.WaitVisible(chromedp.CSS("#checkout-email")))
		act("fill", `textbox "Email"`, chromedp.SendKeys(chromedp.CSS("#checkout-email"), "buyer@acme.example"))
		// The card form is the payment provider's, in a frame of its own
		// origin: its field is found in the frame's document.
		frame, err := chromedp.Run(tab, chromedp.Nodes(chromedp.CSS("#card-frame")))
		if err != nil || len(frame) == 0 {
			fail(fmt.Errorf("the card frame: %v", err))
		}
		inFrame := chromedp.FromNode(frame[0])
		act("", "", chromedp.WaitVisible(chromedp.CSS("#card-number"), inFrame))
		act("fill", `textbox "Card number"`, chromedp.SendKeys(chromedp.CSS("#card-number"), "4242 4242 4242 4242", inFrame))
		act("fill", `textbox "Gift card code"`, chromedp.SendKeys(chromedp.CSS("#gift-code"), "GIFT-2025"))
		act("click", `button "Apply"`, chromedp.Click(chromedp.CSS("#apply-gift")))
		act("", "", chromedp.WaitVisible(chromedp.Search(`//*[@id="gift-status" and contains(text(),"Gift card applied")]`)))
		act("click", `button "Pay"`, chromedp.Click(chromedp.CSS("#pay")))
		act("", "", chromedp.WaitVisible(chromedp.CSS("#pay-error")))
	default:
		fail(fmt.Errorf("unknown mode %q", mode))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
