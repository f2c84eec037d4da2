// The queue's bulk bar (templates/review/queue.html): select every row of the page, or every
// ticket matching the filters; say how many are selected; while any is, the form is marked
// `selecting` and the bar stays in view (tickets.css). Listeners sit on the document: htmx
// swaps the results, bar and rows included.
(function () {
  "use strict";

  function rows(form) {
    return Array.from(form.querySelectorAll("input[name=selected]"));
  }

  function update(form) {
    const boxes = rows(form);
    const checked = boxes.filter((box) => box.checked).length;
    const page = form.querySelector("#select-page");
    const matching = form.querySelector("#select-matching");
    if (page) {
      page.checked = boxes.length > 0 && checked === boxes.length;
      page.indeterminate = checked > 0 && checked < boxes.length;
    }
    if (matching && !page.checked) matching.checked = false;
    const everything = matching && matching.checked;
    const said = form.querySelector("#bulk-selected");
    if (said) {
      said.textContent = everything
        ? `all ${matching.value} matching selected`
        : checked ? `${checked} selected` : "none selected";
    }
    form.classList.toggle("selecting", checked > 0 || everything);
  }

  document.addEventListener("change", (event) => {
    const target = event.target;
    const form = target.closest && target.closest("form.bulk-form");
    if (!form) return;
    if (target.id === "select-page" || target.id === "select-matching") {
      // All matching includes the whole page; leaving the page leaves all matching too.
      const on = target.checked;
      rows(form).forEach((box) => { box.checked = on; });
      if (target.id === "select-page" && !on) {
        const matching = form.querySelector("#select-matching");
        if (matching) matching.checked = false;
      }
    }
    update(form);
  });

  function start() {
    document.querySelectorAll("form.bulk-form").forEach((form) => {
      form.classList.add("scripted");
      update(form);
    });
  }
  document.addEventListener("DOMContentLoaded", start);
  document.addEventListener("htmx:afterSettle", start);
})();
