"""Init scripts making a page's localStorage refuse, as browsers do: the pages that keep drafts
in it (static/annotate/storage.js) must then work as before, without drafts."""

# A browser blocking site data throws on reading window.localStorage; a full one on setItem.
STORAGE_REFUSED = {
    "blocked": "Object.defineProperty(window, 'localStorage', {get() {"
    " throw new DOMException('Access is denied for this document.', 'SecurityError'); }});",
    "full": "Storage.prototype.setItem = function () {"
    " throw new DOMException('The quota has been exceeded.', 'QuotaExceededError'); };",
}
