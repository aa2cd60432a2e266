"""The stream's input: Kafka's topics as Spark's source (kafka_source), and a batch's lines read on
the driver (landing files: driver_read; Kafka records through a kept consumer: kafka_read)."""
