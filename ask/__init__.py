"""Asking: decide a patient's question from believed facts and dispensing (services, reasoners,
guardrail), the ask screen, and the API clients, keys and model-usage caps that bound it."""
