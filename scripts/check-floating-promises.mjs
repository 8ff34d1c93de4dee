// Lists promises nobody handles: a call whose value is a promise used as a statement of its own
// (neither awaited, returned, voided nor given a .catch/.then), or handed to an `assert` call
// or to a comparison where a plain value is meant. Usage: node scripts/check-floating-promises.mjs [tsconfig]
import ts from 'typescript';
import path from 'node:path';

const configPath = path.resolve(process.argv[2] ?? 'tsconfig.json');
const config = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
const program = ts.createProgram(config.fileNames, { ...config.options, noEmit: true, incremental: false });
const checker = program.getTypeChecker();
const findings = [];

function isPromise(node) {
  const type = checker.getTypeAtLocation(node);
  const parts = type.isUnion() ? type.types : [type];
  return parts.some((part) => {
    const then = part.getProperty('then');
    return then !== undefined && part.getProperty('catch') !== undefined;
  });
}

/** A promise kept in a Map, looked up (to compare or test for one), is not a promise misused. */
function mapLookup(call) {
  return ts.isPropertyAccessExpression(call.expression) && checker.getTypeAtLocation(call.expression.expression).getSymbol()?.getName() === 'Map';
}

function report(node, what) {
  const file = node.getSourceFile();
  const { line } = file.getLineAndCharacterOfPosition(node.getStart());
  findings.push(`${path.relative(process.cwd(), file.fileName)}:${line + 1}: ${what}: ${node.getText().slice(0, 90).replace(/\s+/g, ' ')}`);
}

function visit(node) {
  if (ts.isExpressionStatement(node)) {
    const expression = node.expression;
    const callee = ts.isCallExpression(expression) ? expression.expression : undefined;
    const handled =
      callee !== undefined &&
      ((ts.isPropertyAccessExpression(callee) && callee.name.text === 'catch') ||
        // `.then(onFulfilled, onRejected)` handles a rejection as `.catch` does.
        (ts.isPropertyAccessExpression(callee) && callee.name.text === 'then' && expression.arguments.length === 2) ||
        // node:test runs what it registers; the returned promise is its own.
        (ts.isIdentifier(callee) && ['test', 'describe', 'it', 'suite'].includes(callee.text)));
    if ((ts.isCallExpression(expression) || ts.isNewExpression(expression)) && !handled && isPromise(expression)) report(expression, 'floating promise');
  }
  if (ts.isCallExpression(node)) {
    const callee = node.expression.getText();
    if (/^assert(\.\w+)?$/.test(callee) && !/rejects|doesNotReject/.test(callee)) {
      for (const argument of node.arguments) {
        if (!ts.isAwaitExpression(argument) && isPromise(argument)) report(argument, 'promise given to ' + callee);
      }
    }
  }
  if (ts.isBinaryExpression(node) && [ts.SyntaxKind.EqualsEqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsEqualsToken, ts.SyntaxKind.AmpersandAmpersandToken, ts.SyntaxKind.BarBarToken].includes(node.operatorToken.kind)) {
    for (const side of [node.left, node.right]) if (ts.isCallExpression(side) && !mapLookup(side) && isPromise(side)) report(side, 'promise in a condition');
  }
  if ((ts.isIfStatement(node) || ts.isConditionalExpression(node) || ts.isPrefixUnaryExpression(node)) ) {
    const condition = ts.isIfStatement(node) ? node.expression : ts.isConditionalExpression(node) ? node.condition : node.operand;
    if (condition && ts.isCallExpression(condition) && !mapLookup(condition) && isPromise(condition)) report(condition, 'promise in a condition');
  }
  if (ts.isTemplateSpan(node) && ts.isCallExpression(node.expression) && isPromise(node.expression)) report(node.expression, 'promise in a template');
  ts.forEachChild(node, visit);
}

for (const file of program.getSourceFiles()) {
  if (file.isDeclarationFile || file.fileName.includes('node_modules')) continue;
  visit(file);
}
for (const finding of findings) console.log(finding);
console.log(`${findings.length} finding(s)`);
process.exitCode = findings.length > 0 ? 1 : 0;
