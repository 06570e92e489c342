"""What an openFDA recall covers, read from its free-text `code_info`: `parse.parse_scope` returns a
`scope.LotScope`. The pieces, one job each: `openfda_text` (the two fields joined, the re-wrap undone),
`dates` (written dates masked), `windows` (expiry, dispensing and manufacturing windows, "all lots"),
`parse` (the lot grammar), `scope` (the stored shape), `measure` (scored against a labelled split).
How a lot is compared with a dispensed one is drugs.lots (canonical and printed forms)."""
