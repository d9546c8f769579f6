/* Web Workers for pages opened from file:// (the built site, offline).
 *
 * Browsers refuse `new Worker(url)` on file:// pages, and the theme's search runs in a worker. This shim
 * (named so that the theme's offline plugin does not add its CDN copy) runs the worker's script in a hidden
 * iframe instead: messages to the worker are dispatched as `message` events on the iframe's window, and the
 * script's `postMessage` calls come back as `message` events on the Worker object. Over http(s) the
 * browser's own Worker is used. Local, no network.
 */
(function () {
  "use strict";
  if (location.protocol !== "file:" || typeof window === "undefined") return;

  function IframeWorker(url) {
    var self = this;
    this.onmessage = null;
    this.onerror = null;
    this._listeners = { message: [], error: [] };
    this._queue = [];
    this._ready = false;
    var iframe = document.createElement("iframe");
    iframe.hidden = true;
    iframe.setAttribute("aria-hidden", "true");
    (document.body || document.documentElement).appendChild(iframe);
    this._iframe = iframe;
    var win = iframe.contentWindow;
    win.postMessage = function (data) {
      setTimeout(function () { self._emit("message", { data: data }); }, 0);
    };
    win.importScripts = function () {
      throw new Error("importScripts is not available in the file:// worker shim");
    };
    win.onerror = function (message) { self._emit("error", { message: message }); };
    win.__workerLoaded = function () {
      self._ready = true;
      self._queue.splice(0).forEach(function (data) { self.postMessage(data); });
    };
    var src = new URL(url, location.href).href;
    var doc = win.document;
    doc.open();
    doc.write('<!DOCTYPE html><script src="' + src.replace(/"/g, "&quot;") + '"><\/script>' +
              "<script>__workerLoaded()<\/script>");
    doc.close();
  }
  IframeWorker.prototype.postMessage = function (data) {
    if (!this._ready) { this._queue.push(data); return; }
    var win = this._iframe.contentWindow;
    win.dispatchEvent(new win.MessageEvent("message", { data: data }));
  };
  IframeWorker.prototype.addEventListener = function (type, fn) {
    (this._listeners[type] = this._listeners[type] || []).push(fn);
  };
  IframeWorker.prototype.removeEventListener = function (type, fn) {
    var list = this._listeners[type] || [];
    var i = list.indexOf(fn);
    if (i >= 0) list.splice(i, 1);
  };
  IframeWorker.prototype._emit = function (type, event) {
    var handler = this["on" + type];
    if (typeof handler === "function") handler.call(this, event);
    (this._listeners[type] || []).slice().forEach(function (fn) { fn.call(this, event); }, this);
  };
  IframeWorker.prototype.terminate = function () {
    if (this._iframe.parentNode) this._iframe.parentNode.removeChild(this._iframe);
  };
  window.Worker = IframeWorker;
})();
