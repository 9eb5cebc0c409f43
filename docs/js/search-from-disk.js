// A site opened from disk (file://) cannot read its own search index: browsers let no page
// fetch a file, and the search worker never starts. Instead of an empty result list, the search
// box then says how to serve the built site, where search works.
document.addEventListener("DOMContentLoaded", function () {
  if (window.location.protocol !== "file:") {
    return;
  }
  var results = document.getElementById("mkdocs-search-results");
  var query = document.getElementById("mkdocs-search-query");
  if (!results || !query) {
    return;
  }
  var say = function () {
    results.innerHTML = "";
    var note = document.createElement("p");
    note.textContent =
      "Search needs the site served, not opened from disk: run " +
      "`python -m http.server -d site` in the project folder (or `uv run mkdocs serve`) " +
      "and open http://127.0.0.1:8000/";
    results.appendChild(note);
  };
  query.addEventListener("keyup", function () {
    window.setTimeout(say, 0);  // after the theme's own handler has emptied the list
  });
  say();
});
