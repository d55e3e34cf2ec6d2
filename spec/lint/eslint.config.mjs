// ESLint for the whole tree (npm run lint): typescript-eslint's recommended
// rules. Kept under spec/ so the repository's top level stays as given.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'lib/native/build/**', 'fixtures/**', '**/*.js', '**/*.mjs'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      // A leading underscore marks a parameter an interface hands over and this implementation does not need.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Object-literal getters (a core handed to the mesh roles, the guest model's views) read their owner's
      // private fields through a named alias: an arrow function cannot be a getter.
      '@typescript-eslint/no-this-alias': 'off',
      // `cond ? resolve() : reject(e)` and `a && b()` as statements.
      '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
    },
  },
  {
    // Specs and benchmarks build and mutate free-form JSON (P4 programs, fuzz inputs, captured messages);
    // product code keeps the rule.
    files: ['spec/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
