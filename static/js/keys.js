// Keyboard shortcuts for the review desk (the help dialog, "?", lists them).
// Queue: j/k move, Enter opens, c claims, e/u open the ticket at its close forms.
// Ticket page: c claims, e goes to the cause of "close as explained", u to "close as unexplained".
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
    all.forEach((row) => row.classList.remove("current"));
    next.classList.add("current");
    next.setAttribute("aria-current", "true");
    next.scrollIntoView({ block: "nearest" });
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
    if (key === "e") return (location.href = row.dataset.ticketUrl + "#close-explained"), true;
    if (key === "u") return (location.href = row.dataset.ticketUrl + "#close-unexplained"), true;
    return false;
  }

  function onTicket(key) {
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

  // Arriving from the queue with e or u: go straight to that form.
  document.addEventListener("DOMContentLoaded", () => {
    if (location.hash === "#close-explained") focusClose("close-explained", "select[name=cause]");
    if (location.hash === "#close-unexplained") focusClose("close-unexplained", "button[type=submit]");
  });
})();
