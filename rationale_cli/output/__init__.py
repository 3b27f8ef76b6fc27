"""What a user reads: one prediction record and its line, file writers, terminal and HTML
rendering, plots and the HTML report on runs."""
