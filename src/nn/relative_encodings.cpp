// Placeholder: filled in by the issue-4 module work.
