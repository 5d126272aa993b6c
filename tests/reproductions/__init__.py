"""The reproductions' tests (``sgrld_reproductions``), one module per reproduction."""
