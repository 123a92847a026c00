// What the scripts type into the demo storefront (internal/demoapp's
// Email, Password, Card and GiftCode): the secrets their tests search for.
"use strict";

module.exports = {
  EMAIL: "buyer@acme.example",
  PASSWORD: "correct-horse-battery-staple",
  CARD: "4242 4242 4242 4242",
  GIFT: "GIFT-2025",
};
