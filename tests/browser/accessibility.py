"""An automated accessibility check of the page a browser test has open: axe-core (WCAG 2.x A and AA
rules) run in the page, its violations of impact "serious" or "critical" returned for the test to assert
empty. axe-core is a test asset (tests/browser/vendor/README.md), injected, never served."""

from pathlib import Path

AXE = Path(__file__).with_name("vendor") / "axe.min.js"
SERIOUS = {"serious", "critical"}
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def serious_violations(browser, *, context=None) -> list[str]:
    """Each serious or critical axe violation on the open page as 'rule: target (help)'."""
    browser.execute_script(AXE.read_text(encoding="utf-8"))
    result = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(arguments[0] || document, {runOnly: {type: 'tag', values: arguments[1]}})"
        "  .then(r => done(r.violations), e => done({error: String(e)}));",
        context, WCAG_AA)
    if isinstance(result, dict) and "error" in result:
        raise AssertionError(f"axe-core did not run: {result['error']}")
    return [f"{v['id']}: {', '.join(str(n['target']) for n in v['nodes'])} ({v['help']})"
            for v in result if v.get("impact") in SERIOUS]
