import { KnowledgeLayerError } from "../errors.js";
import { METRICS, type Metric } from "./contract.js";

/**
 * Checks the arguments of `VectorStore.createCollection`, the same way for every
 * store: a positive integer dimension and a known metric.
 * @throws KnowledgeLayerError naming the collection and the bad value.
 */
export function checkCollectionSpec(name: string, dimension: number, metric: Metric): void {
  if (!Number.isInteger(dimension) || dimension <= 0) {
    throw new KnowledgeLayerError(
      `collection "${name}": dimension must be a positive integer (got ${dimension})`,
    );
  }
  if (!METRICS.includes(metric)) {
    throw new KnowledgeLayerError(
      `collection "${name}": unknown metric "${metric}" (use ${METRICS.join(", ")})`,
    );
  }
}
