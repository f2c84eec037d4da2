// Keyboard shortcuts for the review desk (the help dialog, "?", lists them).
// Queue: j/k move, Enter opens, c claims, e/u open the ticket at its close forms.
// Ticket page: c claims, e goes to the cause of "close as explained", u to "close as unexplained",
// j/k open the next/previous ticket of the queue it came from, q goes back to that queue,
// a turns auto-advance (open the next ticket after a close) on or off, remembered here.
(() => {
  const typing = (element) =>
    element && (element.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(element.tagName));

  const rows = () => Array.from(document.querySelectorAll("tr[data-ticket-url]"));
  const current = () => document.querySelector("tr[data-ticket-url].current");

  function move(step) {
    const all = rows();
    if (!all.length) return;
    const index = all.indexOf(current());
    const next = all[Math.min(all.length - 1, Math.max(0, index < 0 ? 0 : index + step))];
    mark(next);
    next.scrollIntoView({ block: "nearest" });
  }

  // One row only is the current one, for the eye and for assistive technology.
  function mark(row) {
    rows().forEach((other) => {
      other.classList.remove("current");
      other.removeAttribute("aria-current");
    });
    row.classList.add("current");
    row.setAttribute("aria-current", "true");
  }

  function csrfToken() {
    const field = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (field) return field.value;
    try {
      return JSON.parse(document.body.getAttribute("hx-headers"))["x-csrftoken"];
    } catch {
      return "";
    }
  }

  // A plain POST, as the claim button would send, that comes back to this page.
  function post(url, fields) {
    const form = document.createElement("form");
    form.method = "post";
    form.action = url;
    const values = { csrfmiddlewaretoken: csrfToken(), next: location.pathname + location.search, ...fields };
    for (const [name, value] of Object.entries(values)) {
      const input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      form.appendChild(input);
    }
    document.body.appendChild(form);
    form.submit();
  }

  function focusClose(id, target) {
    const form = document.getElementById(id);
    if (!form) return false;
    const control = form.querySelector(target);
    form.scrollIntoView({ block: "center" });
    control.focus();
    return true;
  }

  function help() {
    const dialog = document.getElementById("keys-help");
    if (dialog && !dialog.open) dialog.showModal();
  }

  function onQueue(key) {
    const row = current();
    if (key === "j") return move(1), true;
    if (key === "k") return move(-1), true;
    if (!row) return false;
    if (key === "Enter") return (location.href = row.dataset.ticketUrl), true;
    if (key === "c") return post(row.dataset.claimUrl, { revision: row.dataset.revision }), true;
    // The fragment names the control itself: the browser focuses a fragment's target when it
    // can, and otherwise blurs whatever a script focused before (then Enter did nothing).
    if (key === "e") return (location.href = row.dataset.ticketUrl + "#close-cause"), true;
    if (key === "u") return (location.href = row.dataset.ticketUrl + "#close-unexplained-button"), true;
    return false;
  }

  const ADVANCE = "crosscheck.autoAdvance";

  function follow(id) {
    const link = document.getElementById(id);
    if (link) location.href = link.href;
    return Boolean(link);
  }

  function toggleAdvance() {
    const box = document.getElementById("auto-advance");
    if (!box) return false;
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }

  function onTicket(key) {
    if (key === "j") return follow("next-ticket");
    if (key === "k") return follow("previous-ticket");
    if (key === "q") return follow("back-to-queue");
    if (key === "a") return toggleAdvance();
    if (key === "c") {
      const claim = document.getElementById("claim-form");
      if (claim) claim.requestSubmit();
      return Boolean(claim);
    }
    if (key === "e") return focusClose("close-explained", "select[name=cause]");
    if (key === "u") return focusClose("close-unexplained", "button[type=submit]");
    return false;
  }

  document.addEventListener("keydown", (event) => {
    // Enter on a chosen cause closes the ticket, as Enter in a text field would.
    if (event.key === "Enter" && event.target.matches("form select[required]") && event.target.value) {
      event.preventDefault();
      event.target.form.requestSubmit();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (event.key === "?") {
      help();
      event.preventDefault();
      return;
    }
    // Enter on a link or button keeps its own meaning.
    if (event.key === "Enter" && event.target.closest("a, button")) return;
    const handled = document.querySelector("tr[data-ticket-url]") ? onQueue(event.key) : onTicket(event.key);
    if (handled) event.preventDefault();
  });

  document.addEventListener("change", (event) => {
    if (event.target.id === "auto-advance") localStorage.setItem(ADVANCE, event.target.checked ? "1" : "");
  });

  function arrived() {
    const box = document.getElementById("auto-advance");
    if (box) {
      box.checked = localStorage.getItem(ADVANCE) === "1";
      // The queue highlights the ticket last opened from it when the reviewer comes back.
      sessionStorage.setItem("crosscheck.lastTicket", location.pathname);
    }
    const last = sessionStorage.getItem("crosscheck.lastTicket");
    const row = last && rows().find((r) => new URL(r.dataset.ticketUrl, location.href).pathname === last);
    if (row) mark(row);
    arrivedToClose();
  }

  // Arriving from the queue with e or u: go straight to that form's control.
  function arrivedToClose() {
    if (location.hash === "#close-cause") focusClose("close-explained", "select[name=cause]");
    if (location.hash === "#close-unexplained-button") focusClose("close-unexplained", "button[type=submit]");
  }
  // Again once loaded, after the browser's own move to the fragment.
  window.addEventListener("load", () => setTimeout(arrivedToClose, 0));
  // Deferred: the document is parsed already, DOMContentLoaded may be past or to come.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", arrived);
  else arrived();
})();
