"""Render: judged rows as console text, JSON, JUnit, CSV, HTML and GitHub output."""
