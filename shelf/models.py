"""Shelf models."""
