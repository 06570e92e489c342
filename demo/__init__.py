"""Everything the demo needs and the product does not: `make demo` (setup, supervisor, story),
the demo patients, the demo escalation and the demo slice builder."""
