"""Table configuration (``hoodie.properties``) and write configuration (``hoodie.*`` options)."""

from shoal.config.table_config import TableConfig, TableType
from shoal.config.write_config import WriteConfig

__all__ = ["TableConfig", "TableType", "WriteConfig"]
