import type { Dashboard } from '@grafana/schema';

// Wire is a type as JSON carries it: a string enum (ThresholdsMode,
// MappingType, …) becomes the union of its values ("absolute" | …), since a
// JSON file cannot name an enum member. Everything else is unchanged, so
// excess-property checks and required fields still apply.
type WireOf<T> = T extends string
  ? `${T}`
  : T extends ReadonlyArray<infer U>
    ? Array<WireOf<U>>
    : T extends object
      ? { [K in keyof T]: WireOf<T[K]> }
      : T;

export type Wire = WireOf<Dashboard>;
