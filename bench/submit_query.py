"""One streaming query as its own Spark application, as `spark-submit` runs it from the
Spark provider's operator (the alternative bench/scale.py compares a runtime with).

    spark-submit bench/submit_query.py <source dir> <output dir> <n> <i>

Reads the JSON records of ``<source dir>``, keeps ``id % n = i`` and writes them with
Spark's file sink; touches ``<output dir>.started`` once the query has started.
"""

import sys

from pyspark.sql import SparkSession

src, out, n, i = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spark = SparkSession.builder.appName(f"query-{i}").config("spark.sql.session.timeZone", "UTC").getOrCreate()
query = (
    spark.readStream.format("json")
    .schema("`id` INT, `v` DOUBLE")
    .load(src)
    .where(f"id % {n} = {i}")
    .writeStream.format("json")
    .option("path", out)
    .option("checkpointLocation", out + "-checkpoint")
    .start()
)
open(out + ".started", "w").close()
query.awaitTermination()
