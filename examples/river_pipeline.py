"""A streamlearn learner inside a river pipeline, scored by progressive validation.

    python examples/river_pipeline.py

``StandardScaler | MulticlassLogisticRegression`` on river's ImageSegments stream
(2,310 examples, 7 classes): each example is predicted before it is learned.
"""

from river import datasets, evaluate, metrics, preprocessing

from streamlearn import MulticlassLogisticRegression


def main() -> float:
    model = preprocessing.StandardScaler() | MulticlassLogisticRegression(lam=1e-2)
    metric = evaluate.progressive_val_score(datasets.ImageSegments(), model, metrics.Accuracy())
    print(f"progressive accuracy: {metric.get():.4f}")
    return metric.get()


if __name__ == "__main__":
    main()
