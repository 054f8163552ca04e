const items = [];
exports.put = (x) => items.push(x);
exports.check = () => { exports.put(1); return items.length === 1; };
