//! Smoke test of the native libtorch install: a tensor op with a backward pass.

use tch::{Kind, Tensor};

#[test]
fn libtorch_computes_a_gradient() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).set_requires_grad(true);
    let y = (&x * &x).sum(Kind::Float); // y = Σ x², dy/dx = 2x
    y.backward();
    let g: Vec<f32> = Vec::try_from(x.grad()).unwrap();
    assert_eq!(g, vec![2.0, 4.0, 6.0]);
}
