// flightrec rerun pins, installed before any page script. __CLOCK__,
// __START__, __RANDOM__, __SEED__ and __NETWORK__ are filled in by the
// recorder.
(function () {
  if (__CLOCK__) {
    // The page's clock starts at the recorded start time and moves only
    // when a timer fires, to the time the timer was due: the same page
    // sees the same times in every run, whatever the machine's speed.
    var RealDate = Date, start = __START__, now = 0;
    var vnow = function () { return start + Math.floor(now); };
    var PinnedDate = function () {
      if (!new.target) return new RealDate(vnow()).toString();
      var a = Array.prototype.slice.call(arguments);
      return a.length === 0 ? new RealDate(vnow()) : new (Function.prototype.bind.apply(RealDate, [null].concat(a)))();
    };
    PinnedDate.prototype = RealDate.prototype;
    PinnedDate.now = vnow;
    PinnedDate.parse = RealDate.parse;
    PinnedDate.UTC = RealDate.UTC;
    Object.defineProperty(RealDate.prototype, "constructor", {value: PinnedDate, configurable: true, writable: true});
    window.Date = PinnedDate;
    if (window.performance) performance.now = function () { return now; };
    var st = window.setTimeout, si = window.setInterval, raf = window.requestAnimationFrame;
    var call = function (fn, self, args) {
      if (typeof fn === "function") return fn.apply(self, args);
      return (0, eval)(String(fn));
    };
    window.setTimeout = function (fn, d) {
      var args = Array.prototype.slice.call(arguments, 2), due = now + Math.max(0, Number(d) || 0);
      return st.call(window, function () { if (due > now) now = due; return call(fn, this, args); }, d);
    };
    window.setInterval = function (fn, d) {
      var args = Array.prototype.slice.call(arguments, 2), every = Math.max(0, Number(d) || 0), due = now;
      return si.call(window, function () { due = Math.max(due + every, now); now = due; return call(fn, this, args); }, d);
    };
    if (raf) window.requestAnimationFrame = function (fn) {
      return raf.call(window, function () { return fn(now); });
    };
  }
  if (__RANDOM__) {
    // mulberry32: the same seed gives every run the same values.
    var a = __SEED__ >>> 0;
    var rnd = function () {
      a = (a + 0x6D2B79F5) | 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    Math.random = rnd;
    if (window.crypto) {
      var fill = function (arr) {
        if (!ArrayBuffer.isView(arr) || arr instanceof Float32Array || arr instanceof Float64Array || arr instanceof DataView)
          throw new TypeError("getRandomValues: an integer typed array is required");
        var b = new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
        for (var i = 0; i < b.length; i++) b[i] = Math.floor(rnd() * 256);
        return arr;
      };
      try { Object.defineProperty(Crypto.prototype, "getRandomValues", {value: fill, configurable: true, writable: true}); } catch (e) {}
      try {
        Object.defineProperty(Crypto.prototype, "randomUUID", {configurable: true, writable: true, value: function () {
          var b = fill(new Uint8Array(16)), h = [];
          b[6] = (b[6] & 0x0f) | 0x40; b[8] = (b[8] & 0x3f) | 0x80;
          for (var i = 0; i < 16; i++) h.push((b[i] + 0x100).toString(16).slice(1));
          return h.slice(0, 4).join("") + "-" + h.slice(4, 6).join("") + "-" + h.slice(6, 8).join("") + "-" + h.slice(8, 10).join("") + "-" + h.slice(10).join("");
        }});
      } catch (e) {}
    }
  }
  if (__NETWORK__) {
    // A recording carries no WebSocket messages yet: refuse the
    // connection rather than reach the live app.
    var Refused = function () {
      throw new DOMException("WebSocket refused: flightrec rerun --pin network answers the network from a recording, which holds no WebSocket messages", "NotSupportedError");
    };
    Refused.CONNECTING = 0; Refused.OPEN = 1; Refused.CLOSING = 2; Refused.CLOSED = 3;
    window.WebSocket = Refused;
  }
})();
