"""The schema files of the reports, shipped as package data (see ``conformance.render.schema``)."""
